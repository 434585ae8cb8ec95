//! A refresher's local copy, the last good value on disk. With it, a
//! process that starts while its store is down has a value to serve, as
//! guarantee G22 promises.
//!
//! The file holds a magic line, the schema id the service sets, the time
//! it was saved, the value's validator, the encoded value, and a checksum
//! over all of it. So a file that is not this value's, or a torn or corrupt
//! one, is an error, never a wrong value. It is replaced atomically. A
//! temporary is created exclusively and owner-only from its first byte. It
//! is synced and renamed over the copy, and then the directory is synced.

use super::Validator;
use std::error::Error as StdError;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// An error from an encoding, or any error a user function returns.
pub type BoxError = Box<dyn StdError + Send + Sync>;

type Encode<T> = Arc<dyn Fn(&T) -> Result<Vec<u8>, BoxError> + Send + Sync>;
type Decode<T> = Arc<dyn Fn(&[u8]) -> Result<T, BoxError> + Send + Sync>;

/// The first bytes of every local copy, in format version 1.
const MAGIC: &[u8; 8] = b"CTCOPY1\n";

/// A header field's length that says "no validator".
const NO_VALIDATOR: u32 = u32::MAX;

/// Where and how a refresher keeps a local copy of its last good value. It
/// names a file, a schema id, and a pair of functions that encode and
/// decode the value. Under the `serde` feature, [`json`](Self::json) gives
/// that pair. Give it to a refresher with
/// [`Refresh::local_copy`](crate::Refresh::local_copy).
///
/// The schema id names the value's shape. Change it when the type changes.
/// A copy saved by an older build is then refused with
/// [`LocalCopyError::Schema`] instead of decoded wrongly.
///
/// # Examples
///
/// ```
/// use circulation_trigger::refresh::LocalCopy;
///
/// let dir = std::env::temp_dir().join(format!("local-copy-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let copy = LocalCopy::new(
///     dir.join("config.copy"),
///     "config-v1",
///     |value: &String| Ok::<_, std::io::Error>(value.as_bytes().to_vec()),
///     |bytes| String::from_utf8(bytes.to_vec()),
/// );
/// copy.save(&String::from("limit = 10"), None)?;
/// let saved = copy.load()?.expect("saved above");
/// assert_eq!(saved.value, "limit = 10");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct LocalCopy<T> {
    path: PathBuf,
    schema: String,
    encode: Encode<T>,
    decode: Decode<T>,
}

impl<T> Clone for LocalCopy<T> {
    fn clone(&self) -> Self {
        Self {
            path: self.path.clone(),
            schema: self.schema.clone(),
            encode: Arc::clone(&self.encode),
            decode: Arc::clone(&self.decode),
        }
    }
}

impl<T> fmt::Debug for LocalCopy<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalCopy")
            .field("path", &self.path)
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

/// A value read back from a [`LocalCopy`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Saved<T> {
    /// The value.
    pub value: T,
    /// Its validator, if it had one. It goes to the first fetch after a
    /// start, which may then answer "unchanged".
    pub validator: Option<Validator>,
    /// When it was saved, by the wall clock of the process that saved it.
    pub saved_at: SystemTime,
}

/// Why a [`LocalCopy`] could not be read or written. A local copy that
/// cannot be read serves nothing, so the refresher starts without a value.
#[derive(Debug)]
#[non_exhaustive]
pub enum LocalCopyError {
    /// The file could not be read or written. A missing file is not an
    /// error, since it is a first start.
    Io(io::Error),
    /// The file is not a whole local copy. It is torn, truncated or
    /// altered, and its checksum does not match.
    Corrupt(&'static str),
    /// The file holds a value of another shape, saved under another
    /// schema id.
    Schema {
        /// The schema id this build expects.
        expected: String,
        /// The schema id in the file.
        found: String,
    },
    /// The value's own decoding failed.
    Decode(BoxError),
    /// The value's own encoding failed.
    Encode(BoxError),
}

impl fmt::Display for LocalCopyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LocalCopyError::Io(error) => write!(f, "the local copy could not be accessed: {error}"),
            LocalCopyError::Corrupt(what) => write!(f, "the local copy is corrupt: {what}"),
            LocalCopyError::Schema { expected, found } => write!(
                f,
                "the local copy was saved under schema {found:?}, not {expected:?}"
            ),
            LocalCopyError::Decode(error) => {
                write!(f, "the local copy's value could not be decoded: {error}")
            }
            LocalCopyError::Encode(error) => {
                write!(
                    f,
                    "the value could not be encoded for the local copy: {error}"
                )
            }
        }
    }
}

impl StdError for LocalCopyError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            LocalCopyError::Io(error) => Some(error),
            LocalCopyError::Decode(error) | LocalCopyError::Encode(error) => Some(&**error),
            _ => None,
        }
    }
}

impl From<io::Error> for LocalCopyError {
    fn from(error: io::Error) -> Self {
        LocalCopyError::Io(error)
    }
}

impl<T> LocalCopy<T> {
    /// A local copy at `path`, under `schema`, with the value's own
    /// encoding.
    pub fn new<EncodeError, DecodeError>(
        path: impl Into<PathBuf>,
        schema: impl Into<String>,
        encode: impl Fn(&T) -> Result<Vec<u8>, EncodeError> + Send + Sync + 'static,
        decode: impl Fn(&[u8]) -> Result<T, DecodeError> + Send + Sync + 'static,
    ) -> Self
    where
        EncodeError: Into<BoxError>,
        DecodeError: Into<BoxError>,
    {
        Self {
            path: path.into(),
            schema: schema.into(),
            encode: Arc::new(move |value| encode(value).map_err(Into::into)),
            decode: Arc::new(move |bytes| decode(bytes).map_err(Into::into)),
        }
    }

    /// A local copy encoded as JSON, with the `serde` feature.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "serde")] {
    /// use circulation_trigger::refresh::LocalCopy;
    ///
    /// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    /// struct Config {
    ///     limit: u32,
    /// }
    ///
    /// let path = std::env::temp_dir().join(format!("json-copy-doc-{}", std::process::id()));
    /// let copy = LocalCopy::json(&path, "config-v1");
    /// copy.save(&Config { limit: 10 }, None).unwrap();
    /// assert_eq!(copy.load().unwrap().unwrap().value, Config { limit: 10 });
    /// # std::fs::remove_file(&path).unwrap();
    /// # }
    /// ```
    #[cfg(feature = "serde")]
    #[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
    pub fn json(path: impl Into<PathBuf>, schema: impl Into<String>) -> Self
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
    {
        Self::new(
            path,
            schema,
            |value: &T| serde_json::to_vec(value),
            |bytes: &[u8]| serde_json::from_slice(bytes),
        )
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the copy back. It returns `Ok(None)` if there is no file, as
    /// on a first start. Leftover temporaries of an interrupted save are
    /// removed first.
    ///
    /// # Errors
    ///
    /// [`LocalCopyError`] if the file could not be read, is corrupt or
    /// torn, was saved under another schema, or holds a value that does
    /// not decode.
    pub fn load(&self) -> Result<Option<Saved<T>>, LocalCopyError> {
        self.remove_leftovers();
        let mut bytes = Vec::new();
        match File::open(&self.path) {
            Ok(mut file) => file.read_to_end(&mut bytes)?,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        let parsed = parse(&bytes)?;
        if parsed.schema != self.schema.as_bytes() {
            return Err(LocalCopyError::Schema {
                expected: self.schema.clone(),
                found: String::from_utf8_lossy(parsed.schema).into_owned(),
            });
        }
        let value = (self.decode)(parsed.payload).map_err(LocalCopyError::Decode)?;
        Ok(Some(Saved {
            value,
            validator: parsed.validator.map(Validator::from),
            saved_at: parsed.saved_at,
        }))
    }

    /// Saves `value` with its validator atomically. The old copy or the
    /// new one is on disk at every instant, whatever crashes.
    ///
    /// # Errors
    ///
    /// [`LocalCopyError::Encode`] if the value does not encode.
    /// [`LocalCopyError::Io`] if the file cannot be written, as on a full
    /// disk or a read-only directory. The old copy then stays.
    pub fn save(&self, value: &T, validator: Option<&Validator>) -> Result<(), LocalCopyError> {
        let payload = (self.encode)(value).map_err(LocalCopyError::Encode)?;
        let bytes = compose(
            self.schema.as_bytes(),
            SystemTime::now(),
            validator.map(Validator::as_str),
            &payload,
        );
        self.replace(&bytes)?;
        Ok(())
    }

    /// Writes `bytes` to a fresh temporary beside the copy and renames it
    /// over the copy.
    fn replace(&self, bytes: &[u8]) -> io::Result<()> {
        let temporary = self.temporary();
        let written = write_new(&temporary, bytes)
            .and_then(|()| fs::rename(&temporary, &self.path))
            .and_then(|()| sync_directory(self.directory()));
        if written.is_err() {
            let _ = fs::remove_file(&temporary);
        }
        written
    }

    fn directory(&self) -> &Path {
        match self.path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        }
    }

    /// The prefix of this copy's temporaries, which are hidden and sit
    /// beside it.
    fn temporary_prefix(&self) -> String {
        let name = self
            .path
            .file_name()
            .map_or_else(String::new, |name| name.to_string_lossy().into_owned());
        format!(".{name}.tmp-")
    }

    /// A name no other save is using, in this process or another.
    fn temporary(&self) -> PathBuf {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let unique = format!(
            "{}{}-{}",
            self.temporary_prefix(),
            std::process::id(),
            NEXT.fetch_add(1, Relaxed)
        );
        self.directory().join(unique)
    }

    /// Removes the temporaries an interrupted save left.
    fn remove_leftovers(&self) {
        let prefix = self.temporary_prefix();
        let Ok(entries) = fs::read_dir(self.directory()) else {
            return;
        };
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
}

/// Creates `path` exclusively, owner-only from its first byte, writes
/// `bytes`, and syncs it.
fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    for chunk in bytes.chunks(64 * 1024) {
        file.write_all(chunk)?;
    }
    file.sync_all()
}

/// Syncs a directory, so a rename in it survives a crash.
fn sync_directory(directory: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(directory)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = directory;
        Ok(())
    }
}

/// A local copy's bytes. They are magic, schema, saved time, validator and
/// payload, then the checksum of everything before it.
fn compose(
    schema: &[u8],
    saved_at: SystemTime,
    validator: Option<&str>,
    payload: &[u8],
) -> Vec<u8> {
    let since = saved_at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    let mut bytes = Vec::with_capacity(payload.len() + schema.len() + 64);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(
        &u32::try_from(schema.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    bytes.extend_from_slice(schema);
    bytes.extend_from_slice(&since.as_secs().to_le_bytes());
    bytes.extend_from_slice(&since.subsec_nanos().to_le_bytes());
    match validator {
        Some(validator) => {
            let length = u32::try_from(validator.len()).unwrap_or(NO_VALIDATOR - 1);
            bytes.extend_from_slice(&length.to_le_bytes());
            bytes.extend_from_slice(&validator.as_bytes()[..length as usize]);
        }
        None => bytes.extend_from_slice(&NO_VALIDATOR.to_le_bytes()),
    }
    bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    bytes.extend_from_slice(payload);
    let checksum = fnv1a64(&bytes);
    bytes.extend_from_slice(&checksum.to_le_bytes());
    bytes
}

/// The fields of a local copy's bytes.
struct Parsed<'a> {
    schema: &'a [u8],
    saved_at: SystemTime,
    validator: Option<String>,
    payload: &'a [u8],
}

fn parse(bytes: &[u8]) -> Result<Parsed<'_>, LocalCopyError> {
    const TORN: LocalCopyError = LocalCopyError::Corrupt("truncated");
    let (body, checksum) = bytes.split_last_chunk::<8>().ok_or(TORN)?;
    if !body.starts_with(MAGIC) {
        return Err(LocalCopyError::Corrupt("not a local copy"));
    }
    if fnv1a64(body) != u64::from_le_bytes(*checksum) {
        return Err(LocalCopyError::Corrupt("checksum mismatch"));
    }
    let mut rest = &body[MAGIC.len()..];
    let mut take = |n: usize| -> Result<&[u8], LocalCopyError> {
        if rest.len() < n {
            return Err(TORN);
        }
        let (head, tail) = rest.split_at(n);
        rest = tail;
        Ok(head)
    };
    let u32_at = |bytes: &[u8]| u32::from_le_bytes(bytes.try_into().unwrap_or([0; 4]));
    let u64_at = |bytes: &[u8]| u64::from_le_bytes(bytes.try_into().unwrap_or([0; 8]));
    let schema_len = u32_at(take(4)?) as usize;
    let schema = take(schema_len)?;
    let secs = u64_at(take(8)?);
    let nanos = u32_at(take(4)?);
    let saved_at = SystemTime::UNIX_EPOCH
        .checked_add(Duration::new(secs, nanos.min(999_999_999)))
        .ok_or(LocalCopyError::Corrupt("saved time out of range"))?;
    let validator = match u32_at(take(4)?) {
        NO_VALIDATOR => None,
        length => Some(
            String::from_utf8(take(length as usize)?.to_vec())
                .map_err(|_| LocalCopyError::Corrupt("validator not UTF-8"))?,
        ),
    };
    let payload_len = usize::try_from(u64_at(take(8)?)).map_err(|_| TORN)?;
    let payload = take(payload_len)?;
    if !rest.is_empty() {
        return Err(LocalCopyError::Corrupt("trailing bytes"));
    }
    Ok(Parsed {
        schema,
        saved_at,
        validator,
        payload,
    })
}

/// 64-bit FNV-1a, a checksum whose value never changes between Rust
/// releases or platforms. The file outlives the build that wrote it.
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;
    bytes.iter().fold(OFFSET, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_published_test_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn every_single_byte_change_is_caught() {
        let bytes = compose(b"s", SystemTime::UNIX_EPOCH, Some("v7"), b"payload");
        assert!(parse(&bytes).is_ok());
        for i in 0..bytes.len() {
            let mut altered = bytes.clone();
            altered[i] ^= 0x01;
            assert!(parse(&altered).is_err(), "byte {i} altered unnoticed");
        }
        for cut in 0..bytes.len() {
            assert!(parse(&bytes[..cut]).is_err(), "cut at {cut} unnoticed");
        }
    }
}
