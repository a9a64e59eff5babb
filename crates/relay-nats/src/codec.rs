//! The codec boundary: which message types may cross to another node, and
//! how they become bytes and back.

use std::any::{Any, TypeId};
use std::fmt;

use relay::{Package, Payload, Pid, Signal};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{DecodeError, EncodeError};
use crate::wire;

/// Default limit on an encoded message, header included: 1 MiB, the
/// default `max_payload` of `nats-server`.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1 << 20;

/// A serializer's or deserializer's error.
type CodecError = Box<dyn std::error::Error + Send + Sync>;

/// How a registered type's values are written on the wire. Every node must
/// register a type with the same format (a frame says its tag, not its
/// format): a mismatch is a [`DecodeError::Deserialize`] at the receiver.
///
/// # Examples
///
/// ```
/// use relay_nats::{Codec, Format};
/// let codec = Codec::new()
///     .register::<String>("text")                        // JSON
///     .register_as::<Vec<u64>>("numbers", Format::Postcard);
/// # drop(codec);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Format {
    /// JSON (`serde_json`): readable, self-describing, larger and slower.
    #[default]
    Json,
    /// `postcard`: a compact binary format (varints, no field names),
    /// several times smaller and faster to encode and decode than JSON;
    /// not self-describing (both ends must agree on the type exactly).
    Postcard,
}

/// One registered message type.
struct Entry {
    tag: String,
    type_name: &'static str,
    type_id: TypeId,
    format: Format,
    is: fn(&Package) -> bool,
    encode: fn(&Package, Format) -> Result<Vec<u8>, CodecError>,
    /// For a value a signal carries (a question or an answer across
    /// nodes), which is a boxed payload rather than a package's.
    encode_value: fn(&(dyn Any + Send), Format) -> Result<Vec<u8>, CodecError>,
    decode: fn(&[u8], Format) -> Result<Payload, CodecError>,
}

fn encode<T: Serialize + Any>(package: &Package, format: Format) -> Result<Vec<u8>, CodecError> {
    let value = package.payload::<T>().expect("checked by `is`");
    match format {
        Format::Json => Ok(serde_json::to_vec(value)?),
        Format::Postcard => Ok(postcard::to_allocvec(value)?),
    }
}

fn encode_value<T: Serialize + Any>(
    value: &(dyn Any + Send),
    format: Format,
) -> Result<Vec<u8>, CodecError> {
    let value = value.downcast_ref::<T>().expect("found by its type id");
    match format {
        Format::Json => Ok(serde_json::to_vec(value)?),
        Format::Postcard => Ok(postcard::to_allocvec(value)?),
    }
}

fn decode<T: DeserializeOwned + Any + Send>(
    bytes: &[u8],
    format: Format,
) -> Result<Payload, CodecError> {
    let value: T = match format {
        Format::Json => serde_json::from_slice(bytes)?,
        Format::Postcard => postcard::from_bytes(bytes)?,
    };
    Ok(Box::new(value))
}

/// A value for a key, carried with its own encoding: the envelope of a
/// question to a keyed process (`keyed/`), whose type only the asking
/// node and the process know. Every codec carries it, under
/// [`KEYED_VALUE_TAG`], so that the node in between (the shard's holder)
/// reads the key without knowing the question's type.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct KeyedValue {
    pub(crate) key: String,
    /// The value's tag and bytes, as [`Codec::encode_value`] wrote them.
    pub(crate) tag: String,
    pub(crate) body: Vec<u8>,
}

/// The tag of [`KeyedValue`], registered in every codec.
const KEYED_VALUE_TAG: &str = "relay-nats.keyed-value";

/// The message types a node can send to and receive from other nodes,
/// each registered under a tag (its name on the wire, the same on every
/// node), encoded with serde: JSON by default, or a compact binary format
/// ([`Format::Postcard`]) per type.
///
/// Only remote sends go through the codec: a local send still moves the
/// value itself, never bytes. Both ends must register a type under the same
/// tag: a payload of an unregistered type is refused at the sender with
/// [`EncodeError::NotRegistered`] (the package comes back), and a frame
/// with an unknown tag is rejected at the receiver with
/// [`DecodeError::UnknownTag`].
///
/// # Examples
///
/// ```
/// use relay_nats::Codec;
/// use sched::prelude::*;
/// use sched::Package;
///
/// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
/// struct Ping(u64);
///
/// let codec = Codec::new().register::<Ping>("ping").register::<String>("text");
/// let bytes = codec.encode(&Package::new(Pid::new(1, 4), Pid::new(2, 8), Ping(7))).unwrap();
/// let package = codec.decode(&bytes, 2).unwrap();
/// assert_eq!(package.source(), Pid::new(1, 4));
/// assert_eq!(package.payload::<Ping>(), Some(&Ping(7)));
/// ```
pub struct Codec {
    entries: Vec<Entry>,
    max_message_bytes: usize,
}

impl Default for Codec {
    fn default() -> Self {
        Codec::new()
    }
}

impl fmt::Debug for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Codec")
            .field(
                "types",
                &self
                    .entries
                    .iter()
                    .map(|e| (&e.tag, e.type_name, e.format))
                    .collect::<Vec<_>>(),
            )
            .field("max_message_bytes", &self.max_message_bytes)
            .finish()
    }
}

impl Codec {
    /// A codec with no types registered, and a limit of
    /// [`DEFAULT_MAX_MESSAGE_BYTES`].
    ///
    /// # Examples
    ///
    /// See [`Codec`].
    pub fn new() -> Self {
        Codec {
            entries: Vec::new(),
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
        }
        .register_as::<KeyedValue>(KEYED_VALUE_TAG, Format::Postcard)
    }

    /// Registers `T` under `tag`, in JSON. A later registration of the
    /// same type or tag replaces the earlier one.
    ///
    /// # Panics
    ///
    /// If `tag` is empty or longer than 255 bytes.
    ///
    /// # Examples
    ///
    /// See [`Codec`].
    pub fn register<T>(self, tag: &str) -> Self
    where
        T: Serialize + DeserializeOwned + Any + Send,
    {
        self.register_as::<T>(tag, Format::Json)
    }

    /// Registers `T` under `tag`, written in `format`. A later
    /// registration of the same type or tag replaces the earlier one.
    ///
    /// # Panics
    ///
    /// If `tag` is empty or longer than 255 bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use relay_nats::{Codec, Format};
    /// use sched::prelude::*;
    /// use sched::Package;
    ///
    /// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    /// struct Tick { n: u64, at: u32 }
    ///
    /// let binary = Codec::new().register_as::<Tick>("tick", Format::Postcard);
    /// let json = Codec::new().register::<Tick>("tick");
    /// let tick = Package::new(Pid::new(1, 4), Pid::new(2, 8), Tick { n: 7, at: 9 });
    /// let small = binary.encode(&tick).unwrap();
    /// assert!(small.len() < json.encode(&tick).unwrap().len());
    /// assert_eq!(binary.decode(&small, 2).unwrap().payload::<Tick>(), Some(&Tick { n: 7, at: 9 }));
    /// // The other format's bytes do not decode.
    /// assert!(json.decode(&small, 2).is_err());
    /// ```
    pub fn register_as<T>(mut self, tag: &str, format: Format) -> Self
    where
        T: Serialize + DeserializeOwned + Any + Send,
    {
        assert!(
            !tag.is_empty() && tag.len() <= 255,
            "a message tag has 1 to 255 bytes"
        );
        self.entries
            .retain(|e| e.tag != tag && e.type_id != TypeId::of::<T>());
        self.entries.push(Entry {
            tag: tag.to_owned(),
            type_name: std::any::type_name::<T>(),
            type_id: TypeId::of::<T>(),
            format,
            is: |package| package.is::<T>(),
            encode: encode::<T>,
            encode_value: encode_value::<T>,
            decode: decode::<T>,
        });
        self
    }

    /// Limits an encoded message, header included (default
    /// [`DEFAULT_MAX_MESSAGE_BYTES`]): longer ones are refused when sent
    /// ([`EncodeError::TooLarge`]) and rejected when received
    /// ([`DecodeError::TooLarge`]). Keep it at most the server's
    /// `max_payload`.
    ///
    /// # Examples
    ///
    /// ```
    /// use relay_nats::{Codec, EncodeError};
    /// use sched::prelude::*;
    /// use sched::Package;
    ///
    /// let codec = Codec::new().register::<String>("text").max_message_bytes(64);
    /// let big = Package::new(Pid::new(1, 1), Pid::new(2, 1), "x".repeat(100));
    /// assert!(matches!(codec.encode(&big), Err(EncodeError::TooLarge { max: 64, .. })));
    /// ```
    pub fn max_message_bytes(mut self, max: usize) -> Self {
        self.max_message_bytes = max;
        self
    }

    /// The limit set by [`max_message_bytes`](Codec::max_message_bytes).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(relay_nats::Codec::new().limit(), relay_nats::DEFAULT_MAX_MESSAGE_BYTES);
    /// ```
    pub fn limit(&self) -> usize {
        self.max_message_bytes
    }

    /// Encodes `package` as a frame (not yet stamped with a sequence
    /// number: the transport does that when it publishes).
    ///
    /// # Errors
    ///
    /// [`EncodeError`]: the payload's type is not registered, its
    /// serializer failed, or the frame would be too large.
    ///
    /// # Examples
    ///
    /// See [`Codec`].
    pub fn encode(&self, package: &Package) -> Result<Vec<u8>, EncodeError> {
        if let Some(signal) = package.payload::<Signal>() {
            return self.encode_signal(package.source(), package.target(), signal);
        }
        let Some(entry) = self.entries.iter().find(|e| (e.is)(package)) else {
            return Err(EncodeError::NotRegistered);
        };
        let body =
            (entry.encode)(package, entry.format).map_err(|source| EncodeError::Serialize {
                tag: entry.tag.clone(),
                source,
            })?;
        self.check_size(wire::size(None, &entry.tag, &body))?;
        Ok(wire::write(
            package.source(),
            package.target(),
            None,
            &entry.tag,
            &body,
        ))
    }

    /// A signal between engines: its bytes as they are, and the value it
    /// carries (a question or an answer) encoded as a message's would be.
    fn encode_signal(
        &self,
        source: Pid,
        target: Pid,
        signal: &Signal,
    ) -> Result<Vec<u8>, EncodeError> {
        let (tag, body) = match signal.payload() {
            None => ("", Vec::new()),
            Some(value) => self.encode_value(&**value)?,
        };
        self.check_size(wire::size(Some(signal.bytes()), tag, &body))?;
        Ok(wire::write(
            source,
            target,
            Some(signal.bytes()),
            tag,
            &body,
        ))
    }

    /// A value (not a package) as its registered type's tag and bytes.
    pub(crate) fn encode_value(
        &self,
        value: &(dyn Any + Send),
    ) -> Result<(&str, Vec<u8>), EncodeError> {
        let type_id = value.type_id();
        let Some(entry) = self.entries.iter().find(|e| e.type_id == type_id) else {
            return Err(EncodeError::NotRegistered);
        };
        let body =
            (entry.encode_value)(value, entry.format).map_err(|source| EncodeError::Serialize {
                tag: entry.tag.clone(),
                source,
            })?;
        Ok((entry.tag.as_str(), body))
    }

    /// A value [`encode_value`](Codec::encode_value) wrote, back.
    pub(crate) fn decode_value(&self, tag: &str, body: &[u8]) -> Result<Payload, DecodeError> {
        let Some(entry) = self.entries.iter().find(|e| e.tag == tag) else {
            return Err(DecodeError::UnknownTag(tag.to_owned()));
        };
        (entry.decode)(body, entry.format).map_err(|source| DecodeError::Deserialize {
            tag: entry.tag.clone(),
            source,
        })
    }

    fn check_size(&self, size: usize) -> Result<(), EncodeError> {
        if size > self.max_message_bytes {
            let max = self.max_message_bytes;
            return Err(EncodeError::TooLarge { size, max });
        }
        Ok(())
    }

    /// Decodes a frame that arrived at node `node` back into a package.
    ///
    /// # Errors
    ///
    /// A [`DecodeError`]: malformed, too large, an unknown tag, or a target
    /// on another node.
    ///
    /// # Examples
    ///
    /// See [`Codec`].
    pub fn decode(&self, bytes: &[u8], node: u32) -> Result<Package, DecodeError> {
        match self.decode_frame(bytes, node)?.content {
            Content::Package(package) => Ok(package),
            Content::Control { .. } => Err(DecodeError::Control),
        }
    }

    /// Decodes a frame, returning its stamp (sender incarnation, sequence
    /// number) beside the package.
    pub(crate) fn decode_frame(&self, bytes: &[u8], node: u32) -> Result<Decoded, DecodeError> {
        let frame = wire::read(bytes, self.max_message_bytes)?;
        if frame.target.node() != node {
            return Err(DecodeError::WrongNode {
                target: frame.target,
                node,
            });
        }
        if frame.kind == wire::Kind::Control {
            let Some(control) = wire::Control::read(frame.signal) else {
                return Err(DecodeError::BadTag);
            };
            return Ok(Decoded {
                content: Content::Control {
                    from: frame.source.node(),
                    control,
                },
                addressed: frame.addressed,
                incarnation: frame.incarnation,
                seq: frame.seq,
                first: frame.first,
            });
        }
        let payload = match frame.tag {
            "" => None,
            tag => Some(self.decode_value(tag, frame.body)?),
        };
        let package = match (frame.kind, payload) {
            (wire::Kind::Message, Some(payload)) => {
                Package::from_payload(frame.source, frame.target, payload)
            }
            (wire::Kind::Signal, payload) => Package::new(
                frame.source,
                frame.target,
                Signal::new(frame.signal.to_vec(), payload),
            ),
            (wire::Kind::Message, None) | (wire::Kind::Control, _) => {
                return Err(DecodeError::BadTag)
            }
        };
        Ok(Decoded {
            content: Content::Package(package),
            addressed: frame.addressed,
            incarnation: frame.incarnation,
            seq: frame.seq,
            first: frame.first,
        })
    }
}

/// What a frame carries, decoded.
#[derive(Debug)]
pub(crate) enum Content {
    /// A message or a signal, for the engine.
    Package(Package),
    /// A control frame from the transport of node `from`, for this one.
    Control { from: u32, control: wire::Control },
}

/// A frame decoded, with what the transport checks of its stamp.
#[derive(Debug)]
pub(crate) struct Decoded {
    pub(crate) content: Content,
    /// The incarnation of this node the sender addressed (0: any).
    pub(crate) addressed: u64,
    /// The sender's incarnation.
    pub(crate) incarnation: u64,
    pub(crate) seq: u64,
    /// The sender's first number for this node's run (0: not known).
    pub(crate) first: u64,
}
