//! A real `nats-server` with JetStream on a free loopback port, killed
//! on drop: the one the tests of `relay-nats` and of
//! `sched-durable-jetstream` start (the latter includes this file).

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `nats-server` child process, killed on drop.
pub struct NatsServer {
    child: Option<Child>,
    pub port: u16,
    /// A configuration file the server reads (authorization), if any.
    config: Option<std::path::PathBuf>,
    /// Held while the server lives: the tests of one binary run one at a
    /// time. Run side by side on 2 cores (a server, two nodes and their
    /// schedulers each), they missed their waits in about one run in four,
    /// with the code of before and after the actor-layer changes alike;
    /// one at a time, none did.
    _serial: std::sync::MutexGuard<'static, ()>,
}

/// See `NatsServer::_serial`.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl NatsServer {
    /// Starts a server, or returns `None` (with a message) when
    /// `nats-server` is not installed and `CI` is not set. Under CI a
    /// missing server fails the test.
    pub fn start() -> Option<NatsServer> {
        NatsServer::start_configured(None)
    }

    /// [`start`](NatsServer::start), the server reading `config` (the
    /// contents of a configuration file: its authorization, say).
    pub fn start_with_config(config: &str) -> Option<NatsServer> {
        NatsServer::start_configured(Some(config))
    }

    fn start_configured(config: Option<&str>) -> Option<NatsServer> {
        let found = Command::new("nats-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            if std::env::var_os("CI").is_some() {
                panic!("nats-server is not installed, and CI is set: install it (apt-get install -y nats-server)");
            }
            eprintln!("SKIPPED: nats-server is not installed (apt-get install -y nats-server); set CI to make this a failure");
            return None;
        }
        // The free port is found by binding and letting go: another
        // process (a second test run on the machine) may take it before
        // the server binds it, and the server then exits while the port
        // answers for someone else's. Such a start tries another port.
        for _ in 0..5 {
            let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let config = config.map(|text| {
                let path = std::env::temp_dir().join(format!(
                    "{}-test-{}-{port}.conf",
                    env!("CARGO_PKG_NAME"),
                    std::process::id()
                ));
                std::fs::write(&path, text).expect("the configuration is written");
                path
            });
            let mut server = NatsServer {
                child: None,
                port,
                config,
                _serial: serial,
            };
            if server.try_spawn() {
                return Some(server);
            }
        }
        panic!("nats-server did not start on any of five free ports");
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Where the server keeps its JetStream data (the cluster names'
    /// bucket): kept across a restart, removed with the server.
    pub(crate) fn store_dir(&self) -> std::path::PathBuf {
        std::env::temp_dir().join(format!(
            "{}-test-{}-{}",
            env!("CARGO_PKG_NAME"),
            std::process::id(),
            self.port
        ))
    }

    pub(crate) fn spawn(&mut self) {
        assert!(
            self.try_spawn(),
            "nats-server exited at its start: port {} taken by another process?",
            self.port
        );
    }

    /// Starts the server; `false` if it exited before it listened, or
    /// just after (its port answered for another process's server).
    fn try_spawn(&mut self) -> bool {
        let store = self.store_dir();
        let store = store.to_str().expect("a UTF-8 temporary directory");
        let mut command = Command::new("nats-server");
        if let Some(config) = &self.config {
            command.arg("-c").arg(config);
        }
        let child = command
            .args(["-a", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-js", "-sd", store])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server starts");
        let child = self.child.insert(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if !matches!(child.try_wait(), Ok(None)) {
                return false;
            }
            assert!(Instant::now() < deadline, "nats-server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        // A server that lost the port to another one exits within
        // milliseconds of its start.
        std::thread::sleep(Duration::from_millis(50));
        if matches!(child.try_wait(), Ok(None)) {
            return true;
        }
        self.child = None;
        false
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server and starts it again on the same port.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(self.store_dir());
        if let Some(config) = &self.config {
            let _ = std::fs::remove_file(config);
        }
    }
}
