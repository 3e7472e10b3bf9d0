//! WandB's run file framing: a 7-byte header, then LevelDB's log format — 32 KiB blocks of
//! chunks `crc32 (u32 LE) | length (u16 LE) | type (u8) | data`, where the checksum is plain
//! IEEE CRC-32 over the type byte and the data (WandB does not mask it as LevelDB does), and a
//! block's last < 7 bytes are zero padding. A record longer than a block is split into
//! FIRST, MIDDLE…, LAST chunks.

const HEADER: &[u8] = b":W&B";
const HEADER_MAGIC: u16 = 0xBEE1;
const HEADER_VERSION: u8 = 0;
pub(super) const HEADER_LEN: usize = 7;
const BLOCK_LEN: usize = 32 * 1024;
const CHUNK_HEADER_LEN: usize = 7;

const FULL: u8 = 1;
const FIRST: u8 = 2;
const MIDDLE: u8 = 3;
const LAST: u8 = 4;

/// Why a file is not a WandB run file at all (as opposed to one with a damaged tail).
pub(super) fn check_header(bytes: &[u8]) -> Result<(), String> {
    let Some(header) = bytes.get(..HEADER_LEN) else {
        return Err(format!(
            "{} bytes, shorter than the {HEADER_LEN}-byte header",
            bytes.len()
        ));
    };
    if &header[..4] != HEADER {
        return Err("it does not start with ':W&B'".to_owned());
    }
    let magic = u16::from_le_bytes([header[4], header[5]]);
    if magic != HEADER_MAGIC || header[6] != HEADER_VERSION {
        return Err(format!(
            "unknown header (magic {magic:#06x}, version {}); a newer WandB format?",
            header[6]
        ));
    }
    Ok(())
}

/// The payloads of a log, and what could not be read.
pub(super) struct Payloads<'a> {
    pub records: Vec<Payload<'a>>,
    pub problems: Vec<String>,
}

/// One record's bytes: borrowed when it came in one chunk, owned when it was reassembled.
pub(super) enum Payload<'a> {
    Whole(&'a [u8]),
    Joined(Vec<u8>),
}

impl Payload<'_> {
    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            Self::Whole(bytes) => bytes,
            Self::Joined(bytes) => bytes,
        }
    }
}

/// Splits the log after the header into record payloads. A damaged chunk is reported and
/// reading resumes at the next block, as LevelDB's own reader does, so one flipped byte loses
/// at most the records of one block; a truncated tail is reported and what precedes it kept.
pub(super) fn payloads(bytes: &[u8]) -> Payloads<'_> {
    let mut records = Vec::new();
    let mut problems = Vec::new();
    let mut pending: Option<(usize, Vec<u8>)> = None;
    let mut pos = HEADER_LEN;
    while pos < bytes.len() {
        let left_in_block = BLOCK_LEN - pos % BLOCK_LEN;
        if left_in_block < CHUNK_HEADER_LEN {
            pos += left_in_block;
            continue;
        }
        let chunk_start = pos;
        let Some(header) = bytes.get(pos..pos + CHUNK_HEADER_LEN) else {
            problems.push(format!(
                "truncated at byte {pos}: {} bytes of a chunk header",
                bytes.len() - pos
            ));
            break;
        };
        let checksum = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        let length = usize::from(u16::from_le_bytes([header[4], header[5]]));
        let kind = header[6];
        let data_start = pos + CHUNK_HEADER_LEN;
        let data_end = data_start + length;
        if length + CHUNK_HEADER_LEN > left_in_block {
            problems.push(format!(
                "corrupt chunk at byte {pos}: its length {length} runs past its block; skipped to the next block"
            ));
            pos += left_in_block;
            pending = None;
            continue;
        }
        let Some(data) = bytes.get(data_start..data_end) else {
            problems.push(format!(
                "truncated at byte {pos}: a chunk of {length} bytes has {} (the writer stopped mid-record?)",
                bytes.len() - data_start
            ));
            break;
        };
        if chunk_checksum(kind, data) != checksum {
            problems.push(format!(
                "checksum mismatch in the chunk at byte {pos}; skipped to the next block"
            ));
            pos += left_in_block;
            pending = None;
            continue;
        }
        pos = data_end;
        match kind {
            FULL => {
                if let Some((start, _)) = pending.take() {
                    problems.push(format!("record begun at byte {start} never finished"));
                }
                records.push(Payload::Whole(data));
            }
            FIRST => {
                if let Some((start, _)) = pending.replace((chunk_start, data.to_vec())) {
                    problems.push(format!("record begun at byte {start} never finished"));
                }
            }
            MIDDLE | LAST => match pending.as_mut() {
                Some((_, joined)) => {
                    joined.extend_from_slice(data);
                    if kind == LAST
                        && let Some((_, joined)) = pending.take()
                    {
                        records.push(Payload::Joined(joined));
                    }
                }
                None => problems.push(format!(
                    "chunk at byte {chunk_start} continues a record whose start was lost; skipped"
                )),
            },
            other => {
                problems.push(format!(
                    "unknown chunk type {other} at byte {chunk_start}; skipped to the next block"
                ));
                pos = chunk_start + left_in_block;
                pending = None;
            }
        }
    }
    if let Some((start, _)) = pending {
        problems.push(format!(
            "truncated: the record begun at byte {start} has no end"
        ));
    }
    Payloads { records, problems }
}

fn chunk_checksum(kind: u8, data: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&[kind]);
    hasher.update(data);
    hasher.finalize()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Frames payloads the way WandB writes them (used to build damaged files in tests).
    pub(crate) fn write_log(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::from(HEADER);
        out.extend_from_slice(&HEADER_MAGIC.to_le_bytes());
        out.push(HEADER_VERSION);
        for payload in payloads {
            let mut rest: &[u8] = payload;
            let mut first = true;
            loop {
                let left = BLOCK_LEN - out.len() % BLOCK_LEN;
                if left < CHUNK_HEADER_LEN {
                    out.resize(out.len() + left, 0);
                    continue;
                }
                let room = left - CHUNK_HEADER_LEN;
                let take = rest.len().min(room);
                let last = take == rest.len();
                let kind = match (first, last) {
                    (true, true) => FULL,
                    (true, false) => FIRST,
                    (false, false) => MIDDLE,
                    (false, true) => LAST,
                };
                let data = &rest[..take];
                out.extend_from_slice(&chunk_checksum(kind, data).to_le_bytes());
                out.extend_from_slice(&u16::try_from(take).unwrap_or(u16::MAX).to_le_bytes());
                out.push(kind);
                out.extend_from_slice(data);
                rest = &rest[take..];
                first = false;
                if last {
                    break;
                }
            }
        }
        out
    }

    fn read(bytes: &[u8]) -> (Vec<Vec<u8>>, Vec<String>) {
        let payloads = payloads(bytes);
        let records = payloads
            .records
            .iter()
            .map(|payload| payload.bytes().to_vec())
            .collect();
        (records, payloads.problems)
    }

    #[test]
    fn records_across_blocks_come_back_whole() {
        let big = vec![7u8; 80_000];
        let small = b"small".to_vec();
        let bytes = write_log(&[&small, &big, &small]);
        let (records, problems) = read(&bytes);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(records, vec![small.clone(), big, small]);
    }

    #[test]
    fn a_flipped_byte_loses_one_block_and_is_reported() {
        let payload = vec![1u8; 1000];
        let many: Vec<&[u8]> = std::iter::repeat_n(payload.as_slice(), 100).collect();
        let mut bytes = write_log(&many);
        bytes[HEADER_LEN + CHUNK_HEADER_LEN + 10] ^= 0x40;
        let (records, problems) = read(&bytes);
        // The first block holds 32 whole records of 1007 bytes and the start of the 33rd: all
        // of them are lost, and the 33rd's end in the next block is reported as an orphan.
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("checksum mismatch"));
        assert!(problems[1].contains("start was lost"));
        assert_eq!(records.len(), 100 - 33);
        assert!(records.iter().all(|record| *record == payload));
    }

    #[test]
    fn a_truncated_tail_keeps_what_precedes_it() {
        let bytes = write_log(&[b"one", b"two", b"three"]);
        let (records, problems) = read(&bytes[..bytes.len() - 2]);
        assert_eq!(records, vec![b"one".to_vec(), b"two".to_vec()]);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].starts_with("truncated"), "{problems:?}");
    }

    #[test]
    fn headers_are_checked() {
        assert!(check_header(b":W&B\xe1\xbe\x00").is_ok());
        assert!(check_header(b":W&B").is_err());
        assert!(check_header(b"PK\x03\x04xyz").is_err());
        assert!(check_header(b":W&B\xe1\xbe\x01").is_err());
    }
}
