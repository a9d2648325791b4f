//! A payment link as a QR code, drawn as SVG here (the `qrcode` crate finds
//! the modules; no image library, no third party): one path of unit squares
//! inside a four-module quiet zone, black on white, as phones scan best.

use std::fmt::Write;

use qrcode::{Color, EcLevel, QrCode};

const QUIET: usize = 4;
/// Drawn size in pixels; the SVG scales.
const SIZE: usize = 264;

/// The SVG of `text`, whose title is the text itself (for screen readers and
/// for anyone who copies it), or None if it is too long for a QR code.
pub fn svg(text: &str) -> Option<String> {
    // Medium correction: a phone reads it from a photo of a screen.
    let code = QrCode::with_error_correction_level(text.as_bytes(), EcLevel::M).ok()?;
    let width = code.width();
    let colors = code.to_colors();
    let side = width + 2 * QUIET;
    let mut path = String::new();
    for (i, c) in colors.iter().enumerate() {
        if *c == Color::Dark {
            let (x, y) = (i % width + QUIET, i / width + QUIET);
            let _ = write!(path, "M{x} {y}h1v1h-1z");
        }
    }
    Some(format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {side} {side}\" width=\"{SIZE}\" height=\"{SIZE}\" \
         shape-rendering=\"crispEdges\" role=\"img\"><title>{}</title>\
         <rect width=\"{side}\" height=\"{side}\" fill=\"white\"/><path fill=\"black\" d=\"{path}\"/></svg>",
        crate::html::esc(text)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_svg_holds_one_square_per_dark_module_and_the_text_as_title() {
        let s = svg("http://127.0.0.1:8080/checkout/abc?x=1&y=2").unwrap();
        assert!(s.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(s.contains("<title>http://127.0.0.1:8080/checkout/abc?x=1&amp;y=2</title>"));
        let code = QrCode::with_error_correction_level(b"x", EcLevel::M).unwrap();
        let dark = code
            .to_colors()
            .iter()
            .filter(|c| **c == Color::Dark)
            .count();
        assert_eq!(svg("x").unwrap().matches('M').count(), dark);
        assert!(svg(&"x".repeat(5000)).is_none(), "too long for a QR code");
    }
}
