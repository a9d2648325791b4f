//! `multipart/form-data` (RFC 7578), as the upload form sends it: the
//! console reads its CSRF token and fields, then hands the file to the bulk
//! component's CSV import as a multipart body of its own.

/// One part: its field name, file name if it is a file, and its bytes.
#[derive(Debug, PartialEq, Eq)]
pub struct Part {
    pub name: String,
    pub filename: Option<String>,
    pub body: Vec<u8>,
}

/// The `boundary` parameter of a `multipart/form-data` Content-Type.
pub fn boundary(content_type: &str) -> Option<String> {
    let (media, params) = content_type.split_once(';')?;
    if !media.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    params.split(';').find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"').to_string())
            .filter(|b| !b.is_empty() && b.len() <= 70)
    })
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

/// A Content-Disposition parameter (`name="file"`).
fn param(disposition: &str, name: &str) -> Option<String> {
    disposition.split(';').find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (k.trim().eq_ignore_ascii_case(name)).then(|| v.trim().trim_matches('"').to_string())
    })
}

/// The parts of `body`, or why it cannot be read.
pub fn parse(body: &[u8], boundary: &str) -> Result<Vec<Part>, &'static str> {
    let delimiter = format!("--{boundary}").into_bytes();
    let mut at = find(body, &delimiter, 0).ok_or("no boundary in the body")? + delimiter.len();
    let mut parts = Vec::new();
    loop {
        if body.get(at..at + 2) == Some(b"--") {
            return Ok(parts);
        }
        if body.get(at..at + 2) != Some(b"\r\n") {
            return Err("a boundary is not followed by a line break");
        }
        let head_end = find(body, b"\r\n\r\n", at + 2).ok_or("a part has no end of headers")?;
        let head = std::str::from_utf8(&body[at + 2..head_end]).map_err(|_| "headers not UTF-8")?;
        let mut next_delim = delimiter.clone();
        next_delim.splice(0..0, *b"\r\n");
        let end = find(body, &next_delim, head_end + 4).ok_or("a part is not closed")?;
        let disposition = head
            .split("\r\n")
            .find_map(|line| {
                let (k, v) = line.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-disposition")
                    .then_some(v)
            })
            .ok_or("a part has no Content-Disposition")?;
        parts.push(Part {
            name: param(disposition, "name").ok_or("a part has no name")?,
            filename: param(disposition, "filename"),
            body: body[head_end + 4..end].to_vec(),
        });
        at = end + next_delim.len();
    }
}

/// A multipart body of `fields` and one file: (Content-Type, body).
pub fn encode(fields: &[(&str, &str)], file: (&str, &str, &[u8])) -> (String, Vec<u8>) {
    let boundary = format!("mmc-console-{}", uuid::Uuid::new_v4().simple());
    let mut out = Vec::new();
    for (name, value) in fields {
        out.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    let (name, filename, bytes) = file;
    // A file name cannot break out of its quotes.
    let filename: String = filename
        .chars()
        .filter(|c| !matches!(c, '"' | '\r' | '\n' | '\\'))
        .collect();
    out.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\nContent-Type: text/csv\r\n\r\n"
        )
        .as_bytes(),
    );
    out.extend_from_slice(bytes);
    out.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_encoded_parses_back() {
        let csv = b"beneficiary_name,phone\r\nAwa,+229\r\n";
        let (ct, body) = encode(&[("name", "June")], ("file", "pay\"roll.csv", csv));
        let parts = parse(&body, &boundary(&ct).unwrap()).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(
            (parts[0].name.as_str(), &parts[0].body[..]),
            ("name", &b"June"[..])
        );
        assert_eq!(parts[1].filename.as_deref(), Some("payroll.csv"));
        assert_eq!(parts[1].body, csv);
        assert_eq!(boundary("text/csv"), None);
        assert!(parse(b"garbage", "x").is_err());
        assert!(
            parse(
                b"--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nunclosed",
                "x"
            )
            .is_err()
        );
    }
}
