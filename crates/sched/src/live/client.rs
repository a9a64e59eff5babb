//! The client side of the protocol: what `sched-top` uses.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::protocol::Request;
use super::snapshot::Snapshot;

/// A connection to an endpoint, asking for one [`Snapshot`] at a time: what
/// `sched-top` uses.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let scheduler = Arc::new(Scheduler::builder().workers(1).build());
/// let endpoint = sched::live::serve(Arc::clone(&scheduler), "127.0.0.1:0")?;
/// let mut client = sched::live::Client::connect(endpoint.local_addr(), Duration::from_secs(5))?;
/// let first = client.snapshot(3)?;
/// let second = client.snapshot(3)?;
/// assert!(second.elapsed_ns > first.elapsed_ns);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Client {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Client {
    /// Connects to `addr`, waiting at most `timeout` for the connection
    /// and then for each answer.
    ///
    /// # Errors
    ///
    /// What connecting returns (refused, timed out).
    ///
    /// # Examples
    ///
    /// See [`Client`].
    pub fn connect(addr: SocketAddr, timeout: Duration) -> io::Result<Client> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        let _ = stream.set_nodelay(true);
        Ok(Client {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
        })
    }

    /// Asks for a snapshot with top lists of `top` processes and reads it.
    ///
    /// # Errors
    ///
    /// A write or read that failed or timed out, a closed connection, an
    /// [`ErrorReply`](super::ErrorReply) or an answer that is not a snapshot.
    ///
    /// # Examples
    ///
    /// See [`Client`].
    pub fn snapshot(&mut self, top: usize) -> io::Result<Snapshot> {
        let request = Request { top: Some(top) };
        let mut line = serde_json::to_string(&request).expect("a request serializes");
        line.push('\n');
        self.writer.write_all(line.as_bytes())?;
        let mut answer = String::new();
        if self.reader.read_line(&mut answer)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the endpoint closed the connection",
            ));
        }
        Snapshot::from_json_line(&answer)
    }
}
