//! A store of several nodes over one `MemoryStore`, fencing as a cluster
//! store must (see `Store`): a journal's writer is the node that created
//! it or last took it over (`take_over`, `take_over_as`), and another
//! node's append to it is refused. Each node has its own handle
//! (`Fencing::node`); every handle keeps the journals it forgets.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use sched_durable::store::{Append, Journal, MemoryStore, Outgoing, SendWatcher, Store};
use sched_durable::DurableError;

#[derive(Clone)]
pub(crate) struct Fencing {
    inner: MemoryStore,
    node: u32,
    writers: Arc<Mutex<HashMap<String, u32>>>,
    forgotten: Arc<Mutex<Vec<Journal>>>,
    /// While set, every append fails (a timeout, a lost connection).
    failing: Arc<AtomicBool>,
}

impl Fencing {
    /// Node 1's handle on a new, empty store.
    pub(crate) fn new() -> Fencing {
        Fencing {
            inner: MemoryStore::new(),
            node: 1,
            writers: Arc::default(),
            forgotten: Arc::default(),
            failing: Arc::default(),
        }
    }

    /// Node `node`'s handle on the same journals.
    #[allow(dead_code)]
    pub(crate) fn node(&self, node: u32) -> Fencing {
        Fencing {
            node,
            ..self.clone()
        }
    }

    /// Node `node` takes the journal of `key` over, if there is one: the
    /// writer's next append is refused.
    #[allow(dead_code)]
    pub(crate) fn take_over_as(&self, key: &str, node: u32) {
        let mut writers = self.writers.lock().unwrap();
        if let Some(writer) = writers.get_mut(key) {
            *writer = node;
        }
    }

    /// Makes every append fail, or succeed again, on every node.
    #[allow(dead_code)]
    pub(crate) fn fail_appends(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    /// The ended journals forgotten so far, in the order forgotten.
    #[allow(dead_code)]
    pub(crate) fn forgotten(&self) -> Vec<Journal> {
        self.forgotten.lock().unwrap().clone()
    }
}

impl Store for Fencing {
    fn append(&self, batch: &[Append]) -> Result<Vec<String>, DurableError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(DurableError::Store("the store is failing".to_owned()));
        }
        let mut writers = self.writers.lock().unwrap();
        let mut kept = Vec::new();
        let mut fenced: Vec<String> = Vec::new();
        for append in batch {
            if append.created.is_some() {
                writers.insert(append.key.clone(), self.node);
            }
            if writers.get(&append.key) == Some(&self.node) {
                kept.push(append.clone());
            } else if !fenced.contains(&append.key) {
                fenced.push(append.key.clone());
            }
        }
        self.inner.append(&kept)?;
        Ok(fenced)
    }

    fn running(&self) -> Result<Vec<Journal>, DurableError> {
        let writers = self.writers.lock().unwrap();
        let running = self.inner.running()?;
        Ok(running
            .into_iter()
            .filter(|j| writers.get(&j.key) == Some(&self.node))
            .collect())
    }

    fn take_over(&self, key: &str) -> Result<Option<Journal>, DurableError> {
        let mut writers = self.writers.lock().unwrap();
        let journal = self.inner.take_over(key)?;
        if journal.is_some() {
            writers.insert(key.to_owned(), self.node);
        }
        Ok(journal)
    }

    fn journal(&self, key: &str) -> Result<Option<Journal>, DurableError> {
        self.inner.journal(key)
    }

    fn keys(&self) -> Result<Vec<(String, bool)>, DurableError> {
        self.inner.keys()
    }

    fn contains(&self, key: &str) -> Result<bool, DurableError> {
        self.inner.contains(key)
    }

    fn forget(&self, key: &str) -> Result<bool, DurableError> {
        let journal = self.inner.journal(key)?;
        let forgot = self.inner.forget(key)?;
        if forgot {
            self.forgotten
                .lock()
                .unwrap()
                .extend(journal.into_iter().filter(|j| j.ended));
            self.writers.lock().unwrap().remove(key);
        }
        Ok(forgot)
    }

    fn outbox(&self) -> Result<Vec<Outgoing>, DurableError> {
        self.inner.outbox()
    }

    fn outbox_to(&self, key: &str) -> Result<Vec<Outgoing>, DurableError> {
        self.inner.outbox_to(key)
    }

    fn outbox_holds_earlier(&self, to: &str, from: &str, seq: u64) -> Result<bool, DurableError> {
        self.inner.outbox_holds_earlier(to, from, seq)
    }

    fn ended(&self, key: &str) -> Result<Option<bool>, DurableError> {
        self.inner.ended(key)
    }

    fn discard(&self, entries: &[(String, String, u64)]) -> Result<(), DurableError> {
        self.inner.discard(entries)
    }

    fn atomic_batches(&self) -> bool {
        self.inner.atomic_batches()
    }

    fn watch_sends(&self, sends: SendWatcher) -> Result<bool, DurableError> {
        self.inner.watch_sends(sends)
    }

    fn size(&self) -> Result<u64, DurableError> {
        self.inner.size()
    }
}
