//! The embedded store fails loudly, never silently: a kill while a store
//! is created leaves no file or a usable store; an empty, foreign or
//! damaged file is refused with an error naming it, never a panic and
//! never an empty store.

mod support;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use sched_durable::prelude::*;
use sched_durable::store::Store;
use support::*;

/// A store with `count` running tallies, each told a few numbers.
fn store_with_journals(path: &std::path::Path, count: u64) {
    let durability = Durability::open(RedbStore::create(path).unwrap());
    durability.register::<Tally>();
    let scheduler = scheduler(&durability, Arc::default());
    for i in 0..count {
        let key = format!("tally-{i}");
        durability.spawn::<Tally>(&scheduler, &key, ()).unwrap();
        for n in 1..=3u64 {
            durability
                .send::<Tally>(&scheduler, &key, &n)
                .unwrap()
                .wait_timeout(WAIT)
                .unwrap();
        }
    }
    scheduler.shutdown(Duration::from_secs(5));
}

fn names_the_file(error: &DurableError, path: &std::path::Path) -> bool {
    error.to_string().contains(&path.display().to_string())
}

#[test]
fn an_empty_file_is_refused_not_taken_for_a_new_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.redb");
    store_with_journals(&path, 3);
    std::fs::File::create(&path).unwrap(); // truncated to zero
    let error = RedbStore::create(&path).unwrap_err();
    assert!(matches!(error, DurableError::Corrupt(_)), "{error}");
    assert!(names_the_file(&error, &path), "{error}");
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        0,
        "nothing was written into it"
    );
}

#[test]
fn a_file_of_garbage_is_refused_with_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.redb");
    let mut rng = Rng(0x5EED);
    let garbage: Vec<u8> = (0..16 * 1024).map(|_| rng.next() as u8).collect();
    std::fs::write(&path, garbage).unwrap();
    let error = RedbStore::create(&path).unwrap_err();
    assert!(matches!(error, DurableError::Corrupt(_)), "{error}");
    assert!(names_the_file(&error, &path), "{error}");
}

#[test]
fn a_redb_file_of_another_program_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.redb");
    {
        let db = redb::Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(redb::TableDefinition::<&str, u64>::new("users"))
            .unwrap()
            .insert("ada", 1)
            .unwrap();
        txn.commit().unwrap();
    }
    let error = RedbStore::create(&path).unwrap_err();
    assert!(
        matches!(&error, DurableError::Corrupt(why) if why.contains("not a journal store")),
        "{error}"
    );
    assert!(names_the_file(&error, &path), "{error}");
}

/// 64 bytes flipped at random places of a store with journals, for many
/// seeds: opening and recovering either fail with an error that names the
/// file, or resume every process as it was; nothing panics.
#[test]
fn flipped_bytes_are_an_error_or_harmless_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let pristine = dir.path().join("pristine.redb");
    store_with_journals(&pristine, 20);
    let bytes = std::fs::read(&pristine).unwrap();
    let mut refused = 0;
    for seed in 1..=40u64 {
        let path = dir.path().join(format!("damaged-{seed}.redb"));
        let mut damaged = bytes.clone();
        let mut rng = Rng(seed);
        for _ in 0..64 {
            let at = (rng.next() % damaged.len() as u64) as usize;
            damaged[at] ^= 1 << (rng.next() % 8);
        }
        std::fs::write(&path, &damaged).unwrap();
        let store = match RedbStore::create(&path) {
            Err(error) => {
                assert!(names_the_file(&error, &path), "seed {seed}: {error}");
                refused += 1;
                continue;
            }
            Ok(store) => store,
        };
        // It opened: every page it reads passed its checksum.
        let durability = Durability::open(store);
        durability.register::<Tally>();
        let scheduler = scheduler(&durability, Arc::default());
        match durability.recover(&scheduler) {
            Ok(recovery) => {
                assert_eq!(
                    recovery.resumed.len() + recovery.failed.len(),
                    20,
                    "seed {seed}: every journal is resumed or reported"
                );
                // What resumed is what was written: never silently
                // different.
                for tally in recovery.resumed {
                    let mut tally = tally.of::<Tally>().unwrap();
                    let key = tally.key().to_owned();
                    durability.send::<Tally>(&scheduler, &key, &0).unwrap();
                    assert_eq!(
                        tally.wait_timeout(WAIT).unwrap(),
                        6,
                        "seed {seed}: {key} resumed with another total"
                    );
                }
            }
            Err(error) => assert!(
                matches!(error, DurableError::Corrupt(_) | DurableError::Store(_)),
                "seed {seed}: {error}"
            ),
        }
        scheduler.shutdown(Duration::from_secs(5));
    }
    assert!(
        refused > 0,
        "64 flipped bytes were never noticed in 40 tries"
    );
}

/// One bit flipped in every copy of one process's key: the page that holds
/// it fails its checksum, so the store is refused when it opens, with an
/// error naming the file, rather than recovering a process under a key
/// that was never written. (Without the check on open, the flipped key
/// reads back as written and resumes as `tallx-7`.)
#[test]
fn a_flipped_bit_in_a_key_is_refused_when_the_store_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.redb");
    store_with_journals(&path, 10);
    let mut bytes = std::fs::read(&path).unwrap();
    let key = b"tally-7";
    let at: Vec<usize> = bytes
        .windows(key.len())
        .enumerate()
        .filter(|(_, w)| w == key)
        .map(|(i, _)| i)
        .collect();
    assert!(!at.is_empty(), "the key is stored as written");
    for i in at {
        bytes[i + 4] ^= 1; // "tally" -> "tallx"
    }
    std::fs::write(&path, &bytes).unwrap();
    match RedbStore::create(&path) {
        Err(error) => {
            assert!(
                matches!(error, DurableError::Corrupt(_) | DurableError::Store(_)),
                "{error}"
            );
            assert!(names_the_file(&error, &path), "{error}");
        }
        Ok(store) => {
            let durability = Durability::open(store);
            durability.register::<Tally>();
            let scheduler = scheduler(&durability, Arc::default());
            let keys: Vec<String> = match durability.recover(&scheduler) {
                Ok(recovery) => recovery
                    .resumed
                    .iter()
                    .map(|p| p.key().to_owned())
                    .collect(),
                Err(error) => panic!("opened, then failed to recover: {error}"),
            };
            scheduler.shutdown(Duration::from_secs(5));
            panic!("a damaged store opened and resumed {keys:?}");
        }
    }
}

const ROLE: &str = "STORE_DAMAGE_CREATOR";

/// In a child: creates stores `<dir>/store-<n>.redb` one after the other
/// until killed.
#[test]
fn creator_child() {
    if let Ok(dir) = std::env::var(ROLE) {
        for n in 0.. {
            let path = std::path::Path::new(&dir).join(format!("store-{n}.redb"));
            drop(RedbStore::create(&path).unwrap());
        }
    }
}

/// A store being created when its process is killed: no file at its path,
/// or a store that opens, empty.
#[test]
fn a_kill_while_a_store_is_created_leaves_no_file_or_a_usable_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(7);
    for round in 0..12 {
        let round_dir = dir.path().join(format!("round-{round}"));
        std::fs::create_dir(&round_dir).unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "creator_child", "--test-threads=1"])
            .env(ROLE, &round_dir)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(20 + rng.next() % 150));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        for entry in std::fs::read_dir(&round_dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue; // a creation's temporary file, never opened as a store
            }
            let store = RedbStore::create(&path)
                .unwrap_or_else(|e| panic!("round {round}: {name} does not open: {e}"));
            assert!(store.running().unwrap().is_empty(), "{name}");
        }
    }
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
