//! `multipart/form-data` (RFC 7578), enough for a form with a file: parts
//! separated by `--boundary` lines, each with its headers, a blank line and
//! its bytes. CRLF as the standard says; bare LF accepted too.

#[derive(Debug, Clone, PartialEq)]
pub struct Part<'a> {
    pub name: String,
    pub filename: Option<String>,
    pub body: &'a [u8],
}

/// The `boundary` parameter of a `multipart/form-data` Content-Type.
pub fn boundary(content_type: &str) -> Option<String> {
    let (mime, params) = content_type.split_once(';')?;
    if !mime.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    parameters(params)
        .into_iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("boundary"))
        .map(|(_, v)| v)
        .filter(|b| !b.is_empty() && b.len() <= 200)
}

/// The form has three fields; a few more are tolerated so that the error
/// names the unknown one, but not thousands.
pub const MAX_PARTS: usize = 16;
/// A part's headers: a Content-Disposition and a Content-Type, in practice.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;

/// Reads each byte of the body a bounded number of times: the search for a
/// part's blank line stops at `MAX_HEADER_BYTES`, and the parts are counted,
/// so a body of many tiny or header-less parts costs what its size costs.
pub fn parse<'a>(body: &'a [u8], boundary: &str) -> Result<Vec<Part<'a>>, String> {
    let delimiter = format!("--{boundary}");
    let delimiter = delimiter.as_bytes();
    // The first delimiter opens the body or follows a preamble's line break.
    let mut at = if body.starts_with(delimiter) {
        0
    } else {
        next_delimiter(body, 0, delimiter)
            .map(|(_, d)| d)
            .ok_or("the body has no part with the boundary of its Content-Type")?
    };
    let mut parts = Vec::new();
    loop {
        let mut rest = &body[at + delimiter.len()..];
        if rest.starts_with(b"--") {
            return Ok(parts);
        }
        // Transport padding, then the line break ending the delimiter line.
        while let [b' ' | b'\t', tail @ ..] = rest {
            rest = tail;
        }
        rest = rest
            .strip_prefix(b"\r\n")
            .or_else(|| rest.strip_prefix(b"\n"))
            .ok_or("a boundary line is not followed by a line break")?;
        if parts.len() == MAX_PARTS {
            return Err(format!("the form has more than {MAX_PARTS} parts"));
        }
        let start = body.len() - rest.len();
        let (headers_end, content_start) = blank_line(body, start)?;
        let headers = std::str::from_utf8(&body[start..headers_end])
            .map_err(|_| "part headers are not UTF-8")?;
        let (content_end, next) = next_delimiter(body, content_start, delimiter)
            .ok_or("the body ends before its closing boundary")?;
        let (name, filename) = disposition(headers)?;
        parts.push(Part {
            name,
            filename,
            body: &body[content_start..content_end],
        });
        at = next;
    }
}

/// (end of the content before it, start of the delimiter) of the next
/// delimiter at the start of a line, searching from `from`.
fn next_delimiter(body: &[u8], from: usize, delimiter: &[u8]) -> Option<(usize, usize)> {
    let mut i = from;
    while let Some(lf) = find(body, b"\n", i) {
        let line = lf + 1;
        let after = body[line..].strip_prefix(delimiter);
        // `--b` opens a delimiter line only if nothing but `--`, padding or the line end follows.
        if after.is_some_and(|a| {
            a.is_empty() || a.starts_with(b"--") || matches!(a[0], b'\r' | b'\n' | b' ' | b'\t')
        }) {
            let end = if lf > from && body[lf - 1] == b'\r' {
                lf - 1
            } else {
                lf
            };
            return Some((end, line));
        }
        i = line;
    }
    None
}

/// (end of the headers, start of the content) of the first blank line
/// (CRLF CRLF or LF LF) after `from`, looked for in one pass over at most
/// `MAX_HEADER_BYTES`.
fn blank_line(body: &[u8], from: usize) -> Result<(usize, usize), String> {
    let window = &body[from..body.len().min(from + MAX_HEADER_BYTES + 4)];
    let mut i = 0;
    while let Some(lf) = window[i..].iter().position(|b| *b == b'\n').map(|p| p + i) {
        let after = &window[lf + 1..];
        if after.starts_with(b"\n") {
            return Ok((from + lf, from + lf + 2));
        }
        if after.starts_with(b"\r\n") && lf > 0 && window[lf - 1] == b'\r' {
            return Ok((from + lf - 1, from + lf + 3));
        }
        i = lf + 1;
    }
    Err(if window.len() > MAX_HEADER_BYTES {
        format!("a part's headers are longer than {MAX_HEADER_BYTES} bytes")
    } else {
        "a part has no blank line after its headers".into()
    })
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// `name` and `filename` of the part's Content-Disposition.
fn disposition(headers: &str) -> Result<(String, Option<String>), String> {
    let value = headers
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-disposition"))
        .map(|(_, v)| v)
        .ok_or("a part has no Content-Disposition header")?;
    let (kind, params) = value.split_once(';').unwrap_or((value, ""));
    if !kind.trim().eq_ignore_ascii_case("form-data") {
        return Err("a part's Content-Disposition is not form-data".into());
    }
    let params = parameters(params);
    let get = |key: &str| {
        params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.clone())
    };
    let name = get("name").ok_or("a part has no name in its Content-Disposition")?;
    Ok((name, get("filename")))
}

/// `; key=value; key="quoted \"value\""` → pairs (keys lower-cased).
fn parameters(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ';' || c.is_whitespace()) {
            chars.next();
        }
        let key: String = chars
            .by_ref()
            .take_while(|c| *c != '=')
            .collect::<String>()
            .trim()
            .to_ascii_lowercase();
        if key.is_empty() {
            return out;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
            // Anything up to the next `;` is noise.
            for c in chars.by_ref() {
                if c == ';' {
                    break;
                }
            }
        } else {
            value = chars
                .by_ref()
                .take_while(|c| *c != ';')
                .collect::<String>()
                .trim()
                .to_string();
        }
        out.push((key, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundary_from_content_type() {
        assert_eq!(
            boundary("multipart/form-data; boundary=----abc123").as_deref(),
            Some("----abc123")
        );
        assert_eq!(
            boundary("Multipart/Form-Data; charset=utf-8; boundary=\"a b\"").as_deref(),
            Some("a b")
        );
        assert_eq!(boundary("text/csv; boundary=x"), None);
        assert_eq!(boundary("multipart/form-data"), None);
    }

    #[test]
    fn parts_with_a_file_and_fields() {
        let body = b"preamble\r\n--XX\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nPayroll\r\n--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a;b.csv\"\r\nContent-Type: text/csv\r\n\r\nx,y\r\n1,2\r\n\r\n--XX--\r\n";
        let parts = parse(body, "XX").unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].name, "name");
        assert_eq!(parts[0].body, b"Payroll");
        assert_eq!(parts[1].name, "file");
        assert_eq!(parts[1].filename.as_deref(), Some("a;b.csv"));
        // Only the CRLF before the delimiter belongs to the framing.
        assert_eq!(parts[1].body, b"x,y\r\n1,2\r\n");
    }

    #[test]
    fn bare_line_feeds_and_boundary_like_content() {
        let body = b"--b\nContent-Disposition: form-data; name=\"file\"\n\nline --b inside\n--bx not a delimiter\n--b--\n";
        let parts = parse(body, "b").unwrap();
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].body, b"line --b inside\n--bx not a delimiter");
    }

    #[test]
    fn broken_bodies_are_errors() {
        assert!(parse(b"no parts here", "b").is_err());
        assert!(
            parse(
                b"--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nunterminated",
                "b"
            )
            .is_err()
        );
        assert!(parse(b"--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--", "b").is_err());
    }

    #[test]
    fn many_parts_and_endless_headers_are_refused_without_rescanning() {
        let mut body = Vec::new();
        for _ in 0..=MAX_PARTS {
            body.extend_from_slice(b"--b\nContent-Disposition: form-data; name=\"x\"\n\nv\n");
        }
        body.extend_from_slice(b"--b--\n");
        let err = parse(&body, "b").unwrap_err();
        assert!(err.contains("more than 16 parts"), "{err}");

        // Headers that never end: refused after MAX_HEADER_BYTES, not at the body's end.
        let mut body = b"--b\r\nContent-Disposition: form-data; name=\"file\"\r\n".to_vec();
        body.extend(std::iter::repeat_n(b'h', 100_000));
        let err = parse(&body, "b").unwrap_err();
        assert!(err.contains("longer than 8192 bytes"), "{err}");
        // A mix of line ends: the first blank line is the one taken.
        let body = b"--b\r\nContent-Disposition: form-data; name=\"f\"\n\nA\r\n\r\nB\r\n--b--";
        assert_eq!(parse(body, "b").unwrap()[0].body, b"A\r\n\r\nB");
    }
}
