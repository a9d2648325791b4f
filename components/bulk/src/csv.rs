//! A small RFC 4180 reader that keeps line numbers, so every bad row can be
//! reported where a person finds it in a spreadsheet.
//!
//! - UTF-8, with or without a byte-order mark (Excel writes one).
//! - Records end with CRLF, LF or a lone CR; the last one may lack it.
//! - Fields are separated by `,`, or by `;` when the header line has
//!   semicolons and no comma (French-locale Excel exports).
//! - A field starting with `"` is quoted: it may hold separators, line breaks
//!   and `""` for a quote. A `"` inside an unquoted field is kept as is.
//! - Blank lines and lines of empty fields only (`,,,,`) are skipped.
//! - A record is reported at the line it starts on.

use std::iter::Peekable;
use std::str::Chars;

#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub line: u32,
    pub fields: Vec<String>,
}

/// A line that could not be read as CSV.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    pub line: u32,
    pub message: String,
}

#[derive(Debug, Default)]
pub struct Parsed {
    pub records: Vec<Record>,
    pub errors: Vec<SyntaxError>,
}

/// The text of a CSV file: UTF-8 without its byte-order mark.
pub fn decode(bytes: &[u8]) -> Result<&str, SyntaxError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    std::str::from_utf8(bytes).map_err(|e| {
        let before = &bytes[..e.valid_up_to()];
        SyntaxError {
            line: before.iter().filter(|b| **b == b'\n').count() as u32 + 1,
            message: "the file is not UTF-8 text; save it as \"CSV UTF-8\"".into(),
        }
    })
}

pub fn parse(text: &str) -> Parsed {
    let header = text.lines().next().unwrap_or_default();
    let separator = if header.contains(';') && !header.contains(',') {
        ';'
    } else {
        ','
    };
    let mut reader = Reader {
        chars: text.chars().peekable(),
        line: 1,
        separator,
    };
    let mut parsed = Parsed::default();
    while reader.chars.peek().is_some() {
        let line = reader.line;
        match reader.record() {
            Ok(fields) if fields.iter().all(|f| f.trim().is_empty()) => {}
            Ok(fields) => parsed.records.push(Record { line, fields }),
            Err(message) => parsed.errors.push(SyntaxError { line, message }),
        }
    }
    parsed
}

struct Reader<'a> {
    chars: Peekable<Chars<'a>>,
    /// Line of the next character.
    line: u32,
    separator: char,
}

impl Reader<'_> {
    /// Reads one record and its line ending.
    fn record(&mut self) -> Result<Vec<String>, String> {
        let mut fields = Vec::new();
        loop {
            let field = if self.chars.peek() == Some(&'"') {
                self.chars.next();
                match self.quoted() {
                    Ok(f) => f,
                    Err(message) => {
                        self.skip_line();
                        return Err(message);
                    }
                }
            } else {
                self.unquoted()
            };
            fields.push(field);
            match self.chars.next() {
                Some(c) if c == self.separator => continue,
                None => return Ok(fields),
                Some(c) => {
                    self.end_of_line(c);
                    return Ok(fields);
                }
            }
        }
    }

    /// Up to (not including) the next separator or line break.
    fn unquoted(&mut self) -> String {
        let mut field = String::new();
        while let Some(&c) = self.chars.peek() {
            if c == self.separator || c == '\n' || c == '\r' {
                break;
            }
            field.push(c);
            self.chars.next();
        }
        field
    }

    /// After the opening quote: up to the closing one, which must be followed
    /// by a separator, a line break or the end.
    fn quoted(&mut self) -> Result<String, String> {
        let mut field = String::new();
        loop {
            match self.chars.next() {
                None => {
                    return Err(
                        "a quoted field is not closed (a \" is missing before the end of the file)"
                            .into(),
                    );
                }
                Some('"') if self.chars.peek() == Some(&'"') => {
                    self.chars.next();
                    field.push('"');
                }
                Some('"') => break,
                Some('\r') => {
                    // CRLF inside a field is one line break.
                    if self.chars.peek() == Some(&'\n') {
                        self.chars.next();
                    }
                    self.line += 1;
                    field.push('\n');
                }
                Some('\n') => {
                    self.line += 1;
                    field.push('\n');
                }
                Some(c) => field.push(c),
            }
        }
        match self.chars.peek() {
            None | Some('\n') | Some('\r') => Ok(field),
            Some(&c) if c == self.separator => Ok(field),
            Some(&c) => Err(format!(
                "unexpected character '{c}' after a closing quote (a quote inside a quoted field is written \"\")"
            )),
        }
    }

    /// `c` was a line break character: consume the rest of it (CRLF).
    fn end_of_line(&mut self, c: char) {
        if c == '\r' && self.chars.peek() == Some(&'\n') {
            self.chars.next();
        }
        self.line += 1;
    }

    /// Skips to the start of the next line, after an error.
    fn skip_line(&mut self) {
        while let Some(c) = self.chars.next() {
            if c == '\n' || c == '\r' {
                self.end_of_line(c);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(p: &Parsed) -> Vec<(u32, Vec<&str>)> {
        p.records
            .iter()
            .map(|r| (r.line, r.fields.iter().map(String::as_str).collect()))
            .collect()
    }

    #[test]
    fn plain_rows_with_crlf_and_a_missing_final_newline() {
        let p = parse("a,b\r\n1,2\r\n3,4");
        assert_eq!(
            fields(&p),
            vec![
                (1, vec!["a", "b"]),
                (2, vec!["1", "2"]),
                (3, vec!["3", "4"])
            ]
        );
        assert!(p.errors.is_empty());
    }

    #[test]
    fn quoted_fields_keep_separators_quotes_and_line_breaks() {
        let p = parse("name,note\n\"Koné, Awa\",\"said \"\"hi\"\"\"\n\"two\r\nlines\",x\nlast,y\n");
        assert_eq!(
            fields(&p),
            vec![
                (1, vec!["name", "note"]),
                (2, vec!["Koné, Awa", "said \"hi\""]),
                (3, vec!["two\nlines", "x"]),
                // Line numbers count the line break inside the quoted field.
                (5, vec!["last", "y"]),
            ]
        );
    }

    #[test]
    fn blank_lines_are_skipped_and_empty_fields_kept() {
        let p = parse("a,b\n\n,,\n1,\n\n");
        assert_eq!(fields(&p), vec![(1, vec!["a", "b"]), (4, vec!["1", ""])]);
    }

    #[test]
    fn semicolons_when_the_header_has_no_comma() {
        let p = parse("a;b\n1;\"x;y\"\n");
        assert_eq!(fields(&p), vec![(1, vec!["a", "b"]), (2, vec!["1", "x;y"])]);
    }

    #[test]
    fn syntax_errors_name_their_line_and_reading_goes_on() {
        let p = parse("a,b\n\"x\"y,1\n2,3\n\"open,4\n5,6\n");
        assert_eq!(fields(&p), vec![(1, vec!["a", "b"]), (3, vec!["2", "3"])]);
        assert_eq!(
            p.errors.iter().map(|e| e.line).collect::<Vec<_>>(),
            vec![2, 4]
        );
        assert!(p.errors[0].message.contains("after a closing quote"));
        assert!(p.errors[1].message.contains("not closed"));
    }

    #[test]
    fn byte_order_mark_is_dropped_and_bad_utf8_located() {
        assert_eq!(decode(b"\xEF\xBB\xBFa,b\n").unwrap(), "a,b\n");
        let e = decode(b"a,b\n1,2\n\xFF,3\n").unwrap_err();
        assert_eq!(e.line, 3);
    }
}

#[cfg(test)]
mod props {
    use proptest::prelude::*;

    proptest! {
        /// CSV import never panics, whatever the bytes.
        #[test]
        fn any_bytes_parse_or_fail_cleanly(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            if let Ok(text) = super::decode(&bytes) {
                let _ = super::parse(text);
            }
        }

        #[test]
        fn csv_like_text_parses_without_panic(text in "[a-z0-9,;\"\r\n +]{0,300}") {
            let _ = super::parse(&text);
        }
    }
}
