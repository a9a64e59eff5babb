//! skynet: a million-leaf tree of processes reporting sums as messages,
//! against a `tokio::spawn` tree and rayon `join`.

use super::*;

/// One node of the skynet tree: a leaf sends its number to its parent; an
/// inner node spawns `SKYNET_DIV` children, adds up the sums they send it,
/// and sends the total to its parent (the root finishes with it instead).
struct Skynet {
    num: u64,
    size: u64,
    parent: Option<Pid>,
    spawned: bool,
    waiting: u64,
    sum: u64,
}

impl Skynet {
    fn new(num: u64, size: u64, parent: Option<Pid>) -> Self {
        Skynet {
            num,
            size,
            parent,
            spawned: false,
            waiting: 0,
            sum: 0,
        }
    }

    fn report(&self, out: &mut Output<'_>, sum: u64) -> Result<(), BoxError> {
        match self.parent {
            Some(parent) => {
                send(out, parent, sum)?;
                out.finish(());
            }
            None => out.finish(sum),
        }
        Ok(())
    }
}

impl Process for Skynet {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, method: &str, _: Payload) -> Result<(), InitError> {
        init_run(method)
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.size == 1 {
            return self.report(out, self.num);
        }
        if !self.spawned {
            self.spawned = true;
            let me = out.pid();
            let sub = self.size / SKYNET_DIV;
            for i in 0..SKYNET_DIV {
                let child = Skynet::new(self.num + i * sub, sub, Some(me));
                let pid = out.context().allocate_pid()?;
                out.spawn(Spawn::new(child).method("run").at(pid))?;
            }
            self.waiting = SKYNET_DIV;
        }
        for event in events {
            if let Event::Message(package) = event {
                self.sum += *package.payload::<u64>().expect("a u64 sum");
                self.waiting -= 1;
            }
        }
        if self.waiting == 0 {
            return self.report(out, self.sum);
        }
        out.idle();
        Ok(())
    }
    fn close(&mut self) {}
}

/// The plain tokio version: an `async fn` that spawns its children and
/// keeps their handles in an array (no boxing of its own: the spawn helper
/// below breaks the recursion, and the task cell is tokio's one allocation
/// per node).
async fn tokio_skynet(num: u64, size: u64) -> u64 {
    if size == 1 {
        return num;
    }
    let sub = size / SKYNET_DIV;
    let children: [tokio::task::JoinHandle<u64>; SKYNET_DIV as usize] =
        std::array::from_fn(|i| spawn_tokio_skynet(num + i as u64 * sub, sub));
    let mut sum = 0;
    for child in children {
        sum += child.await.expect("child task");
    }
    sum
}

fn spawn_tokio_skynet(num: u64, size: u64) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(tokio_skynet(num, size))
}

/// The sum of children `lo..hi` of the node (`num`, `size`), split in
/// halves with `rayon::join`.
fn rayon_children(num: u64, sub: u64, lo: u64, hi: u64) -> u64 {
    if hi - lo == 1 {
        rayon_skynet(num + lo * sub, sub)
    } else {
        let mid = lo + (hi - lo) / 2;
        let (a, b) = rayon::join(
            || rayon_children(num, sub, lo, mid),
            || rayon_children(num, sub, mid, hi),
        );
        a + b
    }
}

fn rayon_skynet(num: u64, size: u64) -> u64 {
    if size == 1 {
        num
    } else {
        rayon_children(num, size / SKYNET_DIV, 0, SKYNET_DIV)
    }
}

pub(crate) fn skynet(c: &mut Criterion) {
    let mut group = c.benchmark_group("skynet");
    group.sample_size(10);
    // `cargo xtask bench --quick` sets BENCH_QUICK so the whole suite fits
    // in a few minutes; a full run measures 15 s per peer.
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    group.measurement_time(Duration::from_secs(if quick { 3 } else { 15 }));

    let engine = engine();
    group.bench_function("ours", |b| {
        b.iter(|| {
            let root = engine
                .context()
                .spawn(
                    Spawn::new(Skynet::new(0, SKYNET_SIZE, None))
                        .method("run")
                        .at(pid(&engine)),
                )
                .expect("submitted");
            let sum = root.wait().expect("the root finished");
            assert_eq!(sum.downcast_ref::<u64>(), Some(&SKYNET_SUM));
        })
    });
    shut(engine);

    let rt = runtime();
    group.bench_function("tokio", |b| {
        b.iter(|| {
            let sum = rt
                .block_on(rt.spawn(tokio_skynet(0, SKYNET_SIZE)))
                .expect("root task");
            assert_eq!(sum, SKYNET_SUM);
        })
    });
    drop(rt);

    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(WORKERS)
        .build()
        .expect("rayon pool");
    group.bench_function("rayon", |b| {
        b.iter(|| {
            let sum = pool.install(|| rayon_skynet(0, black_box(SKYNET_SIZE)));
            assert_eq!(sum, SKYNET_SUM);
        })
    });
    drop(pool);
    group.finish();
}
