//! Bar charts as inline SVG, drawn on the server: no script, no CDN, and
//! nothing the CSP must allow (presentation attributes, no style; inline in
//! the page, so it loads nothing and needs no namespace). Each
//! chart names itself for screen readers, and each bar says its value.

use std::fmt::Write;

use super::html::esc;

/// The charts' words: (key, English, French), looked up by [`super::html::t`].
pub const WORDS: &[(&str, &str, &str)] = &[];

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 200.0;
const LEFT: f64 = 8.0;
/// Room for the last bar's label.
const RIGHT: f64 = 24.0;
const BOTTOM: f64 = 28.0;
const TOP: f64 = 16.0;

/// One bar: its label under the axis (may be blank), its value, and what a
/// reader hears or sees on hover.
pub struct Bar {
    pub label: String,
    pub value: f64,
    pub says: String,
}

/// A bar chart titled `title`; `max` fixes the scale (a rate's 100), else
/// the largest value.
pub fn bars(title: &str, bars: &[Bar], max: Option<f64>) -> String {
    let top = max
        .unwrap_or_else(|| bars.iter().map(|b| b.value).fold(0.0, f64::max))
        .max(1.0);
    let n = bars.len().max(1) as f64;
    let slot = (WIDTH - LEFT - RIGHT) / n;
    let plot = HEIGHT - BOTTOM - TOP;
    let mut out = format!(
        "<figure><svg viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"100%\" role=\"img\" aria-label=\"{t}\">\
         <title>{t}</title><line x1=\"{LEFT}\" y1=\"{base}\" x2=\"{WIDTH}\" y2=\"{base}\" stroke=\"rgb(85,85,85)\"/>",
        t = esc(title),
        base = HEIGHT - BOTTOM,
    );
    for (i, b) in bars.iter().enumerate() {
        let h = (b.value.max(0.0) / top * plot).max(if b.value > 0.0 { 1.0 } else { 0.0 });
        let x = LEFT + i as f64 * slot + slot * 0.15;
        let _ = write!(
            out,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"#12355b\"><title>{says}</title></rect>",
            y = HEIGHT - BOTTOM - h,
            w = slot * 0.7,
            says = esc(&b.says),
        );
        if !b.label.is_empty() {
            let _ = write!(
                out,
                "<text x=\"{cx:.1}\" y=\"{ty}\" font-size=\"11\" text-anchor=\"middle\" fill=\"#1a1a1a\">{}</text>",
                esc(&b.label),
                cx = x + slot * 0.35,
                ty = HEIGHT - BOTTOM + 14.0,
            );
        }
    }
    let _ = write!(
        out,
        "</svg><figcaption>{}</figcaption></figure>",
        esc(title)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_scale_to_the_largest_and_escape_their_words() {
        let svg = bars(
            "Volume <per> day",
            &[
                Bar {
                    label: "1".into(),
                    value: 50.0,
                    says: "a & b".into(),
                },
                Bar {
                    label: String::new(),
                    value: 100.0,
                    says: "c".into(),
                },
                Bar {
                    label: String::new(),
                    value: 0.0,
                    says: "d".into(),
                },
            ],
            None,
        );
        assert!(svg.contains("aria-label=\"Volume &lt;per&gt; day\""));
        assert!(svg.contains("height=\"156.0\"") && svg.contains("height=\"78.0\""));
        assert!(svg.contains("height=\"0.0\"") && svg.contains("<title>a &amp; b</title>"));
        assert_eq!(svg.matches("<rect").count(), 3);
    }
}
