//! What a transport needs to know before it connects.

use std::fmt;

use crate::codec::Codec;

/// Default most messages waiting to be published (see
/// [`NatsConfig::max_pending`]).
pub const DEFAULT_MAX_PENDING: usize = 65_536;

/// Default interval between a node's heartbeats (see
/// [`NatsConfig::failure_detector`]).
pub const DEFAULT_HEARTBEAT: std::time::Duration = std::time::Duration::from_millis(500);

/// Default silence after which a node is declared down (see
/// [`NatsConfig::failure_detector`]).
pub const DEFAULT_DOWN_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

/// Default lease of a cluster name (see [`NatsConfig::name_lease`]).
pub const DEFAULT_NAME_LEASE: std::time::Duration = std::time::Duration::from_secs(6);

/// How to connect a [`NatsTransport`](crate::NatsTransport): the server
/// URL, the message types ([`Codec`]), and the client's own options
/// (credentials, TLS, reconnection) as `async_nats::ConnectOptions`.
///
/// # Examples
///
/// ```
/// use relay_nats::{async_nats::ConnectOptions, Codec, NatsConfig};
///
/// let config = NatsConfig::new("tls://nats.example.com:4222")
///     .codec(Codec::new().register::<String>("text"))
///     .options(
///         ConnectOptions::with_user_and_password("node3".into(), "secret".into())
///             .require_tls(true)
///             .add_root_certificates("ca.pem".into()),
///     )
///     .subject_prefix("orders");
/// assert_eq!(config.frame_subject(3, 1), "orders.node.3.1");
/// ```
pub struct NatsConfig {
    pub(crate) url: String,
    pub(crate) codec: Codec,
    pub(crate) options: async_nats::ConnectOptions,
    pub(crate) prefix: String,
    pub(crate) max_pending: usize,
    pub(crate) heartbeat: std::time::Duration,
    pub(crate) down_after: std::time::Duration,
    pub(crate) names_bucket: Option<String>,
    pub(crate) name_lease: std::time::Duration,
}

impl fmt::Debug for NatsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NatsConfig")
            .field("url", &self.url)
            .field("codec", &self.codec)
            .field("prefix", &self.prefix)
            .field("max_pending", &self.max_pending)
            .field("heartbeat", &self.heartbeat)
            .field("down_after", &self.down_after)
            .field("names_bucket", &self.names_bucket)
            .field("name_lease", &self.name_lease)
            .finish_non_exhaustive()
    }
}

impl NatsConfig {
    /// Connect to `url` (`nats://host:port`, `tls://host:port`, or several
    /// separated by commas), with no message types registered, the
    /// client's default options, and subjects under `sched`.
    ///
    /// # Examples
    ///
    /// See [`NatsConfig`].
    pub fn new(url: impl Into<String>) -> Self {
        NatsConfig {
            url: url.into(),
            codec: Codec::new(),
            options: async_nats::ConnectOptions::new(),
            prefix: "sched".into(),
            max_pending: DEFAULT_MAX_PENDING,
            heartbeat: DEFAULT_HEARTBEAT,
            down_after: DEFAULT_DOWN_AFTER,
            names_bucket: None,
            name_lease: DEFAULT_NAME_LEASE,
        }
    }

    /// The failure detector: this node sends a heartbeat every
    /// `heartbeat` (default 500 ms), and declares another node down once
    /// it has not heard from it for `down_after` (default 2 s): sends to
    /// it are then refused as
    /// [`Unreachable`](relay::SendErrorKind::Unreachable), cause
    /// [`LinkError::NodeDown`](crate::LinkError::NodeDown), until it is
    /// heard from again. A node is declared down at most `down_after` plus
    /// one `heartbeat` after it went silent. Keep `down_after` several
    /// heartbeats long: a node whose heartbeats are late by more than that
    /// (its transport's thread starved, or cut off from the server) is
    /// declared down while it still runs, until its next heartbeat arrives.
    ///
    /// # Panics
    ///
    /// If `heartbeat` is zero or `down_after` is not longer than it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = relay_nats::NatsConfig::new("nats://127.0.0.1:4222")
    ///     .failure_detector(Duration::from_millis(200), Duration::from_secs(1));
    /// # drop(config);
    /// ```
    pub fn failure_detector(
        mut self,
        heartbeat: std::time::Duration,
        down_after: std::time::Duration,
    ) -> Self {
        assert!(
            !heartbeat.is_zero() && down_after > heartbeat,
            "a heartbeat interval above zero, and a bound longer than it"
        );
        self.heartbeat = heartbeat;
        self.down_after = down_after;
        self
    }

    /// Turns on names across the cluster
    /// ([`ClusterNames`](crate::ClusterNames)), kept in the JetStream
    /// bucket `bucket` (its stream is `KV_<bucket>`; every node of a
    /// cluster names the same one). The server must run with JetStream
    /// (`nats-server -js`), version 2.11 or later (per-message time to
    /// live). A node makes the bucket if it is missing and its credentials
    /// allow; under [`permissions`](NatsConfig::permissions) they do not,
    /// and an administrator makes it once with
    /// [`ClusterNames::create_bucket`](crate::ClusterNames::create_bucket).
    ///
    /// # Examples
    ///
    /// ```
    /// let config = relay_nats::NatsConfig::new("nats://127.0.0.1:4222").cluster_names("names");
    /// assert!(format!("{config:?}").contains("names"));
    /// ```
    pub fn cluster_names(mut self, bucket: impl Into<String>) -> Self {
        self.names_bucket = Some(bucket.into());
        self
    }

    /// How long a cluster name outlives its node's last renewal (default
    /// [`DEFAULT_NAME_LEASE`], 6 s). The node renews each of its names
    /// every third of the lease; a name whose node stopped (killed, hung,
    /// cut off from the server) lapses within the lease, whoever else is
    /// alive. Each node's lease entries carry the lease as their time to
    /// live, rounded up to whole seconds; every node should use the same.
    ///
    /// # Panics
    ///
    /// If `lease` is under 300 ms (a renewal every 100 ms at least).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = relay_nats::NatsConfig::new("nats://127.0.0.1:4222")
    ///     .cluster_names("names")
    ///     .name_lease(Duration::from_secs(10));
    /// assert!(format!("{config:?}").contains("10s"));
    /// ```
    pub fn name_lease(mut self, lease: std::time::Duration) -> Self {
        assert!(
            lease >= std::time::Duration::from_millis(300),
            "a lease of at least 300 ms"
        );
        self.name_lease = lease;
        self
    }

    /// The message types this node sends and receives.
    ///
    /// # Examples
    ///
    /// See [`NatsConfig`].
    pub fn codec(mut self, codec: Codec) -> Self {
        self.codec = codec;
        self
    }

    /// The client's options: credentials (user and password, token, NKey,
    /// a `.creds` file), TLS (`require_tls`, root certificates, a client
    /// certificate), reconnection delays, the connection name.
    ///
    /// # Examples
    ///
    /// See [`NatsConfig`].
    pub fn options(mut self, options: async_nats::ConnectOptions) -> Self {
        self.options = options;
        self
    }

    /// The first token of every subject the transport uses (default
    /// `sched`), so that several clusters can share one NATS account.
    ///
    /// # Examples
    ///
    /// See [`NatsConfig`].
    pub fn subject_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Most messages waiting to be handed to the client (default
    /// [`DEFAULT_MAX_PENDING`]); a send beyond is refused with
    /// [`SendErrorKind::Full`](relay::SendErrorKind::Full) and
    /// [`LinkError::Backlog`](crate::LinkError::Backlog), the package back.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = relay_nats::NatsConfig::new("nats://127.0.0.1:4222").max_pending(1_000);
    /// # drop(config);
    /// ```
    pub fn max_pending(mut self, max: usize) -> Self {
        self.max_pending = max;
        self
    }

    /// The subject node `from` publishes its frames for node `to` on:
    /// `<prefix>.node.<to>.<from>`. Node `to` listens on
    /// `<prefix>.node.<to>.*` and takes the last token as the sender: with
    /// the permissions of [`permissions`](NatsConfig::permissions) on the
    /// server, only node `from`'s credentials can publish there.
    ///
    /// # Examples
    ///
    /// See [`NatsConfig`].
    pub fn frame_subject(&self, to: u32, from: u32) -> String {
        frame_subject(&self.prefix, to, from)
    }

    /// What the server must let node `node` publish and subscribe to, and
    /// nothing more: its frames carry its own number in their subject, its
    /// announcements too, so credentials limited to these subjects cannot
    /// speak for another node (see the distributed guide's Security
    /// section).
    ///
    /// With cluster names on, add the bucket's: publish on the node's own
    /// claims and leases (`$KV.<bucket>.*.n<node>` and
    /// `$KV.<bucket>.*.n<node>.l`: no other node's), and two JetStream
    /// API subjects, both for the bucket's stream only and both read-only:
    /// `$JS.API.STREAM.INFO.KV_<bucket>` (opening it) and
    /// `$JS.API.STREAM.MSG.GET.KV_<bucket>` (reading a name's entries).
    /// No stream create, update, delete or purge, no message delete, no
    /// consumer: the bucket is made once with
    /// [`admin_permissions`](NatsConfig::admin_permissions) (see
    /// [`ClusterNames::create_bucket`](crate::ClusterNames::create_bucket)).
    ///
    /// # Examples
    ///
    /// ```
    /// let config = relay_nats::NatsConfig::new("nats://127.0.0.1:4222")
    ///     .subject_prefix("orders")
    ///     .cluster_names("names");
    /// let allowed = config.permissions(3);
    /// assert!(allowed.publish.contains(&"orders.node.*.3".to_string()));
    /// assert!(allowed.subscribe.contains(&"orders.node.3.*".to_string()));
    /// assert!(allowed.publish.contains(&"$KV.names.*.n3".to_string()));
    /// assert!(!allowed.publish.iter().any(|s| s.starts_with("$JS.API.>") || s.starts_with("$KV.names.>")));
    /// ```
    pub fn permissions(&self, node: u32) -> Permissions {
        let prefix = &self.prefix;
        let mut publish = vec![
            format!("{prefix}.node.*.{node}"),
            announce_subject(prefix, node),
            format!("{prefix}.probe.{node}.>"),
        ];
        let subscribe = vec![
            format!("{prefix}.node.{node}.*"),
            members_subject(prefix),
            // The client's replies (the attach probe, JetStream's answers).
            "_INBOX.>".to_string(),
        ];
        if let Some(bucket) = &self.names_bucket {
            publish.push(format!("$KV.{bucket}.*.n{node}"));
            publish.push(format!("$KV.{bucket}.*.n{node}.l"));
            publish.push(format!("$JS.API.STREAM.INFO.KV_{bucket}"));
            publish.push(format!("$JS.API.STREAM.MSG.GET.KV_{bucket}"));
        }
        Permissions { publish, subscribe }
    }

    /// What the administrator that makes the names bucket once
    /// ([`ClusterNames::create_bucket`](crate::ClusterNames::create_bucket))
    /// must be allowed: create and read the bucket's stream
    /// (`$JS.API.STREAM.CREATE.KV_<bucket>`,
    /// `$JS.API.STREAM.INFO.KV_<bucket>`) and its replies. Give these to a
    /// user no node runs as. Empty without
    /// [`cluster_names`](NatsConfig::cluster_names).
    ///
    /// # Examples
    ///
    /// ```
    /// let config = relay_nats::NatsConfig::new("nats://127.0.0.1:4222").cluster_names("names");
    /// let admin = config.admin_permissions();
    /// assert!(admin.publish.contains(&"$JS.API.STREAM.CREATE.KV_names".to_string()));
    /// ```
    pub fn admin_permissions(&self) -> Permissions {
        match &self.names_bucket {
            Some(bucket) => Permissions {
                publish: vec![
                    format!("$JS.API.STREAM.CREATE.KV_{bucket}"),
                    format!("$JS.API.STREAM.INFO.KV_{bucket}"),
                ],
                subscribe: vec!["_INBOX.>".to_string()],
            },
            None => Permissions {
                publish: Vec::new(),
                subscribe: Vec::new(),
            },
        }
    }
}

/// The subjects a node's credentials must be allowed, from
/// [`NatsConfig::permissions`]: write them into the server's authorization
/// (a user's `permissions { publish, subscribe }`, or a JWT's).
///
/// # Examples
///
/// ```
/// let allowed = relay_nats::NatsConfig::new("nats://127.0.0.1:4222").permissions(1);
/// assert_eq!(allowed.publish[0], "sched.node.*.1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Permissions {
    /// Subjects the node may publish to.
    pub publish: Vec<String>,
    /// Subjects the node may subscribe to.
    pub subscribe: Vec<String>,
}

pub(crate) fn frame_subject(prefix: &str, to: u32, from: u32) -> String {
    format!("{prefix}.node.{to}.{from}")
}

/// What node `node` subscribes to for its frames.
pub(crate) fn inbox_subject(prefix: &str, node: u32) -> String {
    format!("{prefix}.node.{node}.*")
}

/// Where node `node` announces itself.
pub(crate) fn announce_subject(prefix: &str, node: u32) -> String {
    format!("{prefix}.nodes.{node}")
}

/// What every node subscribes to for the announcements.
pub(crate) fn members_subject(prefix: &str) -> String {
    format!("{prefix}.nodes.*")
}

/// The sender's number: the last token of a frame's or an announcement's
/// subject.
pub(crate) fn sender_of(subject: &str) -> Option<u32> {
    subject.rsplit('.').next()?.parse().ok()
}
