//! Opening a store: the options, the connection, the stream and the
//! lease bucket made when missing, this incarnation's first lease, and the
//! task that renews it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::stream::{self, StorageType};
use async_nats::jetstream::{self, kv};
use async_nats::ConnectOptions;
use sched_durable::DurableError;

use crate::error::store_error;
use crate::incarnation::Inner;
use crate::message::JournalWriter;
use crate::store::JetStreamStore;

/// How long a node's journal lease lasts unless
/// [`lease`](JetStreamStoreBuilder::lease) says otherwise: a dead node's
/// journals are taken over at most this long after its last renewal.
///
/// # Examples
///
/// ```
/// assert_eq!(sched_durable_jetstream::DEFAULT_JOURNAL_LEASE.as_secs(), 6);
/// ```
pub const DEFAULT_JOURNAL_LEASE: Duration = Duration::from_secs(6);

/// How long one store call waits for the server.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How to open a [`JetStreamStore`]: the server, the node, and the
/// options.
///
/// # Examples
///
/// ```no_run
/// use sched_durable_jetstream::JetStreamStore;
/// use std::time::Duration;
///
/// let store = JetStreamStore::builder("nats://127.0.0.1:4222", 3)
///     .prefix("orders")
///     .lease(Duration::from_secs(10))
///     .replicas(3)
///     .open()?;
/// assert_eq!(store.writer().node, 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct JetStreamStoreBuilder {
    url: String,
    node: u32,
    prefix: String,
    lease: Duration,
    replicas: usize,
    timeout: Duration,
    options: Option<ConnectOptions>,
}

impl JetStreamStoreBuilder {
    /// The prefix of the stream's subjects and of the stream's and the
    /// lease bucket's names (`sched` unless set): letters, digits, `-` and
    /// `_`. Nodes sharing journals use the same prefix.
    ///
    /// # Examples
    ///
    /// See [`JetStreamStoreBuilder`].
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The lease ([`DEFAULT_JOURNAL_LEASE`] unless set): the bucket's
    /// `max_age` when this store makes the bucket. An existing bucket keeps
    /// its own, and this node renews at a third of that.
    ///
    /// # Examples
    ///
    /// See [`JetStreamStoreBuilder`].
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How many replicas the stream and the bucket get when this store
    /// makes them (1 unless set).
    ///
    /// # Examples
    ///
    /// See [`JetStreamStoreBuilder`].
    pub fn replicas(mut self, replicas: usize) -> Self {
        self.replicas = replicas.max(1);
        self
    }

    /// How long one store call waits for the server (10 s unless set);
    /// past it, the call fails with [`DurableError::Store`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use sched_durable_jetstream::JetStreamStore;
    /// use std::time::Duration;
    ///
    /// let store = JetStreamStore::builder("nats://127.0.0.1:4222", 1)
    ///     .timeout(Duration::from_secs(2))
    ///     .open()?;
    /// # drop(store);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The client's connection options (credentials, TLS, a name).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use sched_durable_jetstream::async_nats::ConnectOptions;
    /// use sched_durable_jetstream::JetStreamStore;
    ///
    /// let options = ConnectOptions::with_user_and_password("node".into(), "secret".into());
    /// let store = JetStreamStore::builder("nats://127.0.0.1:4222", 1)
    ///     .options(options)
    ///     .open()?;
    /// # drop(store);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn options(mut self, options: ConnectOptions) -> Self {
        self.options = Some(options);
        self
    }

    /// Connects, makes the stream and the lease bucket if they do not
    /// exist, and writes this node's lease with a new incarnation (which
    /// replaces a lease of an earlier run of this node: its journals can be
    /// taken over at once).
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] when the prefix is not valid, the server
    /// cannot be reached, or it refused the stream, the bucket or the
    /// lease.
    ///
    /// # Examples
    ///
    /// See [`JetStreamStoreBuilder`].
    pub fn open(self) -> Result<JetStreamStore, DurableError> {
        let valid = !self.prefix.is_empty()
            && self
                .prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid {
            return Err(DurableError::Store(format!(
                "the journal prefix {:?} is not letters, digits, '-' and '_'",
                self.prefix
            )));
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| store_error("starting the journal store's runtime", e))?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("jetstream-store".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let _ = stopped.await;
                });
            })
            .map_err(|e| store_error("starting the journal store's thread", e))?;
        let mut store = JetStreamStore {
            inner: None,
            handle,
            timeout: self.timeout,
            stop: Some(stop),
            thread: Some(thread),
        };
        let me = JournalWriter {
            node: self.node,
            incarnation: new_incarnation(),
        };
        let inner = store.block(connect(self, me))?;
        let inner = Arc::new(inner);
        store.inner = Some(inner.clone());
        let interval = store.block({
            let inner = inner.clone();
            async move {
                let status = inner
                    .leases
                    .status()
                    .await
                    .map_err(|e| store_error("reading the lease bucket", e))?;
                let lease = status.max_age();
                if lease.is_zero() {
                    return Err(DurableError::Store(
                        "the journal lease bucket has no max_age: leases would never lapse".into(),
                    ));
                }
                Ok(lease / 3)
            }
        })?;
        store.handle.spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                if !inner.renewing.load(Ordering::Acquire) || !inner.renew().await {
                    break;
                }
            }
        });
        tracing::info!(writer = %me, "the JetStream journal store is open");
        Ok(store)
    }
}

impl JetStreamStore {
    /// A builder for the store of node `node` on the server at `url`.
    ///
    /// # Examples
    ///
    /// See [`JetStreamStoreBuilder`].
    pub fn builder(url: impl Into<String>, node: u32) -> JetStreamStoreBuilder {
        JetStreamStoreBuilder {
            url: url.into(),
            node,
            prefix: "sched".to_owned(),
            lease: DEFAULT_JOURNAL_LEASE,
            replicas: 1,
            timeout: DEFAULT_TIMEOUT,
            options: None,
        }
    }
}

fn new_incarnation() -> u64 {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos
        ^ (u64::from(std::process::id()) << 40)
        ^ COUNT
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

async fn connect(config: JetStreamStoreBuilder, me: JournalWriter) -> Result<Inner, DurableError> {
    let options = config.options.unwrap_or_default();
    let client = options
        .connect(config.url.as_str())
        .await
        .map_err(|e| store_error("connecting to the NATS server", e))?;
    let js = jetstream::new(client);
    let prefix = config.prefix;
    let stream = js
        .get_or_create_stream(stream::Config {
            name: format!("{prefix}-journals"),
            description: Some("sched-durable: durable processes' journals".to_owned()),
            subjects: vec![
                format!("{prefix}.journal.>"),
                format!("{prefix}.outbox"),
                format!("{prefix}.discard"),
            ],
            storage: StorageType::File,
            num_replicas: config.replicas,
            ..Default::default()
        })
        .await
        .map_err(|e| store_error("opening the journal stream", e))?;
    let bucket = format!("{prefix}-journal-leases");
    let leases = match js.get_key_value(&bucket).await {
        Ok(leases) => leases,
        Err(_) => js
            .create_key_value(kv::Config {
                bucket: bucket.clone(),
                history: 1,
                max_age: config.lease,
                storage: StorageType::File,
                num_replicas: config.replicas,
                description: "sched-durable: which node incarnations are alive".to_owned(),
                ..Default::default()
            })
            .await
            .map_err(|e| store_error("opening the journal lease bucket", e))?,
    };
    let revision = leases
        .put(
            Inner::lease_key(me.node),
            format!("{:x}", me.incarnation).into(),
        )
        .await
        .map_err(|e| store_error("writing this node's journal lease", e))?;
    Ok(Inner {
        js,
        stream,
        leases,
        prefix,
        me,
        owned: Mutex::new(HashMap::new()),
        lease_revision: AtomicU64::new(revision),
        renewing: AtomicBool::new(true),
    })
}
