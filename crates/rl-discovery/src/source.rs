//! Turning the bytes of a `.py` file into text the parser accepts, the way CPython would:
//! a UTF-8 BOM, else a PEP 263 coding declaration on line 1 or 2, else UTF-8.

use std::borrow::Cow;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use encoding_rs::Encoding;

use crate::SkipReason;

/// How many leading bytes are checked for NUL to call a file binary. Python source cannot
/// contain NUL, so one is enough; looking at a prefix keeps the check cheap on big files.
const BINARY_SNIFF_LEN: usize = 8 * 1024;

/// Files larger than this are not read (a scan may set its own limit).
pub const MAX_SOURCE_BYTES: u64 = 4 * 1024 * 1024;

/// Reads a Python file as text, decoded the way CPython decodes source.
pub fn read_python_source(path: &Path) -> Result<String, SkipReason> {
    let bytes = read_source_bytes(path, MAX_SOURCE_BYTES)?;
    decode(&bytes).map(Cow::into_owned)
}

/// The bytes of a regular file of at most `limit` bytes. Anything else (a FIFO, a socket, a
/// device, a folder) is refused before it is opened, and opened without blocking in case it
/// became one since: reading a FIFO nobody writes to would wait forever.
pub(crate) fn read_source_bytes(path: &Path, limit: u64) -> Result<Vec<u8>, SkipReason> {
    let unreadable = |error: std::io::Error| SkipReason::Unreadable {
        message: error.to_string(),
    };
    check_regular(&std::fs::metadata(path).map_err(unreadable)?, limit)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(unreadable)?;
    let size = check_regular(&file.metadata().map_err(unreadable)?, limit)?;
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    // Bounded even if the file grows while it is read.
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    let read = bytes.len() as u64;
    if read > limit {
        return Err(SkipReason::TooLarge { bytes: read, limit });
    }
    Ok(bytes)
}

/// The size of a regular file within the limit.
fn check_regular(metadata: &std::fs::Metadata, limit: u64) -> Result<u64, SkipReason> {
    if !metadata.is_file() {
        return Err(SkipReason::NotAFile {
            file_type: rl_settings::file_kind(metadata.file_type()).to_owned(),
        });
    }
    let bytes = metadata.len();
    if bytes > limit {
        return Err(SkipReason::TooLarge { bytes, limit });
    }
    Ok(bytes)
}

pub(crate) fn decode(bytes: &[u8]) -> Result<Cow<'_, str>, SkipReason> {
    if bytes[..bytes.len().min(BINARY_SNIFF_LEN)].contains(&0) {
        return Err(SkipReason::Binary);
    }
    if let Some(rest) = bytes.strip_prefix(b"\xEF\xBB\xBF") {
        return decode_utf8(rest, "utf-8-sig");
    }
    match coding_cookie(bytes) {
        None => decode_utf8(bytes, "utf-8"),
        Some(label) => {
            let normalized = label.to_ascii_lowercase().replace('_', "-");
            if matches!(normalized.as_str(), "utf-8" | "utf8" | "utf-8-sig") {
                return decode_utf8(bytes, &label);
            }
            let encoding =
                encoding_for_python_label(&normalized).ok_or(SkipReason::UnknownEncoding {
                    label: label.clone(),
                })?;
            let (text, had_errors) = encoding.decode_without_bom_handling(bytes);
            if had_errors {
                return Err(SkipReason::Undecodable {
                    encoding: label,
                    detail: "bytes that are not valid in the declared encoding".into(),
                });
            }
            Ok(text)
        }
    }
}

fn decode_utf8<'a>(bytes: &'a [u8], label: &str) -> Result<Cow<'a, str>, SkipReason> {
    std::str::from_utf8(bytes).map(Cow::Borrowed).map_err(|error| {
        let line = 1 + bytes[..error.valid_up_to()].iter().filter(|&&b| b == b'\n').count();
        SkipReason::Undecodable {
            encoding: label.to_owned(),
            detail: format!(
                "invalid byte at offset {} (line {line}) and no coding declaration that explains it",
                error.valid_up_to()
            ),
        }
    })
}

/// The PEP 263 declaration: a comment on line 1 or 2 matching `coding[:=]\s*([-\w.]+)`.
/// Line 2 only counts when line 1 is itself a comment or blank, as in CPython.
fn coding_cookie(bytes: &[u8]) -> Option<String> {
    let mut lines = bytes.split(|&b| b == b'\n').take(2);
    let first = lines.next()?;
    if let Some(label) = cookie_in_line(first) {
        return Some(label);
    }
    let first_trimmed = first.trim_ascii_start();
    if first_trimmed.is_empty() || first_trimmed.starts_with(b"#") {
        return lines.next().and_then(cookie_in_line);
    }
    None
}

fn cookie_in_line(line: &[u8]) -> Option<String> {
    let line = line.trim_ascii_start();
    if !line.starts_with(b"#") {
        return None;
    }
    let at = line.windows(6).position(|w| w == b"coding")?;
    let rest = line.get(at + 6..)?;
    let rest = rest
        .strip_prefix(b":")
        .or_else(|| rest.strip_prefix(b"="))?;
    let label: Vec<u8> = rest
        .trim_ascii_start()
        .iter()
        .copied()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        .collect();
    (!label.is_empty()).then(|| String::from_utf8_lossy(&label).into_owned())
}

/// Python's codec names mostly coincide with the WHATWG labels encoding_rs knows; the common
/// ones that do not are mapped here.
fn encoding_for_python_label(normalized: &str) -> Option<&'static Encoding> {
    let whatwg = match normalized {
        "latin-1" | "latin1" | "iso-8859-1" | "iso8859-1" | "l1" | "cp819" => "iso-8859-1",
        "cp1252" | "windows-1252" => "windows-1252",
        "shift-jis" | "sjis" | "cp932" => "shift_jis",
        "euc-jp" | "eucjp" => "euc-jp",
        "gb2312" | "gbk" | "cp936" => "gbk",
        "big5" | "cp950" => "big5",
        "ascii" | "us-ascii" => "windows-1252",
        other => other,
    };
    Encoding::for_label(whatwg.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_without_cookie_is_borrowed() {
        let text = decode(b"x = 'caf\xc3\xa9'\n").unwrap();
        assert!(matches!(text, Cow::Borrowed(_)));
        assert_eq!(text, "x = 'café'\n");
    }

    #[test]
    fn bom_is_stripped() {
        assert_eq!(decode(b"\xEF\xBB\xBFx = 1\n").unwrap(), "x = 1\n");
    }

    #[test]
    fn latin1_cookie_on_line_one_decodes() {
        let text = decode(b"# -*- coding: latin-1 -*-\ns = '\xe9'\n").unwrap();
        assert_eq!(text, "# -*- coding: latin-1 -*-\ns = 'é'\n");
    }

    #[test]
    fn cookie_on_line_two_after_shebang_decodes() {
        let text = decode(b"#!/usr/bin/env python\n# vim: set fileencoding=cp1252 :\ns = '\x80'\n")
            .unwrap();
        assert!(text.contains('€'));
    }

    #[test]
    fn cookie_on_line_two_after_code_is_ignored() {
        let err = decode(b"import os\n# coding: latin-1\ns = '\xe9'\n").unwrap_err();
        assert!(matches!(err, SkipReason::Undecodable { .. }), "{err:?}");
    }

    #[test]
    fn invalid_utf8_reports_line() {
        let err = decode(b"a = 1\nb = '\xff'\n").unwrap_err();
        let SkipReason::Undecodable { detail, .. } = err else {
            panic!("{err:?}")
        };
        assert!(detail.contains("line 2"), "{detail}");
    }

    #[test]
    fn unknown_cookie_is_named() {
        let err = decode(b"# coding: klingon\n").unwrap_err();
        assert_eq!(
            err,
            SkipReason::UnknownEncoding {
                label: "klingon".into()
            }
        );
    }

    #[test]
    fn nul_byte_means_binary() {
        assert_eq!(decode(b"\x00\x01\x02").unwrap_err(), SkipReason::Binary);
    }
}
