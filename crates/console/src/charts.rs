//! Charts as inline SVG, drawn on the server: no script, no CDN, and
//! nothing the CSP must allow (presentation attributes, no style; inline in
//! the page, so it loads nothing and needs no namespace).
//!
//! A chart is read at a glance: a value axis with round ticks and
//! gridlines, labelled bars, the previous period as lighter bars beside
//! this one with a legend, and a rate on a fixed 0–100 % scale. For screen
//! readers the picture is one image with a summary, and the same numbers
//! follow as a table in a disclosure. The drawing is 360 units wide, so
//! that at 390 px (358 px of page) its 12-unit text is still 12 px tall;
//! wider screens place charts side by side (the stylesheet's `.sides`).

use std::fmt::Write;

use mmc_console_kit::format;
use mmc_console_kit::html::{Lang, esc, t};

/// The charts' words: (key, English, French), looked up by [`mmc_console_kit::html::t`].
pub const WORDS: &[(&str, &str, &str)] = &[
    ("chart_numbers", "Show the numbers", "Voir les chiffres"),
    (
        "chart_empty",
        "Nothing to show yet: no figures in this period.",
        "Rien à montrer pour l'instant : aucun chiffre sur cette période.",
    ),
];

/// The drawing's width in user units, and its text size.
const WIDTH: f64 = 360.0;
const FONT: f64 = 12.0;
// On a 390 px phone, with 16 px of margin each side, the drawing is shown
// 358 px wide: its text must stay at least 11 px tall.
const _: () = assert!(FONT * (390.0 - 32.0) / WIDTH >= 11.0);
/// The height of a column chart's plot area.
const PLOT: f64 = 150.0;

const INK: &str = "#1a1a1a";
const MUTED: &str = "#555555";
const GRID: &str = "#d9d9d9";
const THIS: &str = "#12355b";
const BEFORE: &str = "#9db3cc";

/// How values map to the value axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// From 0 to a round number at or above the largest value.
    Fit,
    /// From 0 to 100, whatever the values: a rate.
    Percent,
}

/// One bar: its name (a day, a category), its value in this period (none
/// when there is nothing to measure, such as a rate with no outcome yet)
/// and in the previous one, the value as written beside a row (plain
/// text), and what a reader sees on hover (HTML, such as
/// [`mmc_console_kit::html::tf`] writes).
pub struct Bar {
    pub label: String,
    pub value: Option<f64>,
    pub previous: Option<f64>,
    pub value_text: String,
    pub says: String,
}

/// The chart's numbers as a table: a caption, the column heads and the
/// rows, as plain text (escaped here).
pub struct Table {
    pub caption: String,
    pub head: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// A chart to draw: `title` (plain text) is shown above it and, with
/// `summary` (HTML, such as [`mmc_console_kit::html::tf`] writes), said to screen
/// readers; `tick` writes an axis value; `legend` names this
/// period and the previous one when bars have a previous value.
pub struct Chart<'a> {
    pub lang: Lang,
    pub title: String,
    pub summary: String,
    pub scale: Scale,
    pub tick: &'a dyn Fn(f64) -> String,
    pub bars: Vec<Bar>,
    pub legend: Option<[String; 2]>,
    pub table: Option<Table>,
}

/// A percentage as the language writes it: `97.5%`, `97,5 %`.
pub fn percent(lang: Lang, v: f64) -> String {
    let n = format::number(lang, v, 1);
    match lang {
        Lang::Fr => format!("{n}\u{a0}%"),
        Lang::En => format!("{n}%"),
    }
}

/// The value axis's ticks, from 0 up: for a rate 0, 25, 50, 75, 100; else
/// about four steps of 1, 2 or 5 times a power of ten (whole numbers: the
/// values are counts and amounts) up to the first at or above `max`.
pub fn ticks(scale: Scale, max: f64) -> Vec<f64> {
    if scale == Scale::Percent {
        return vec![0.0, 25.0, 50.0, 75.0, 100.0];
    }
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let rough = max / 4.0;
    let power = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|s| *s >= rough)
        .unwrap_or(10.0 * power)
        .round()
        .max(1.0);
    let steps = (max / step).ceil() as usize;
    (0..=steps).map(|i| i as f64 * step).collect()
}

/// About how wide `s` is drawn, in user units.
fn text_width(s: &str) -> f64 {
    s.chars().count() as f64 * FONT * 0.6
}

/// Whether there is anything to draw: a rate of 0 is a fact, a sum of 0
/// everywhere is nothing.
fn is_empty(c: &Chart) -> bool {
    !c.bars
        .iter()
        .flat_map(|b| [b.value, b.previous])
        .flatten()
        .any(|v| v > 0.0 || c.scale == Scale::Percent)
}

/// The largest value of either period.
fn largest(c: &Chart) -> f64 {
    c.bars
        .iter()
        .flat_map(|b| [b.value, b.previous])
        .flatten()
        .fold(0.0, f64::max)
}

fn has_previous(c: &Chart) -> bool {
    c.legend.is_some() && c.bars.iter().any(|b| b.previous.is_some())
}

/// A text of `FONT` size centred on `x` but kept inside the drawing.
fn text_at(out: &mut String, x: f64, y: f64, fill: &str, s: &str) {
    let half = text_width(s) / 2.0;
    let x = x.clamp(half + 1.0, WIDTH - half - 1.0);
    let _ = write!(
        out,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{FONT}\" text-anchor=\"middle\" fill=\"{fill}\">{}</text>",
        esc(s)
    );
}

/// The legend's swatches on one line from the left (two lines when they
/// do not fit); returns the height it takes.
fn legend(out: &mut String, c: &Chart) -> f64 {
    let Some([this, before]) = c.legend.as_ref().filter(|_| has_previous(c)) else {
        return 0.0;
    };
    let second_x = 4.0 + 16.0 + text_width(this) + 16.0;
    let (bx, by) = if second_x + 16.0 + text_width(before) <= WIDTH {
        (second_x, 0.0)
    } else {
        (4.0, 20.0)
    };
    for (x, y, fill, name) in [(4.0, 0.0, THIS, this), (bx, by, BEFORE, before)] {
        let _ = write!(
            out,
            "<rect x=\"{x:.1}\" y=\"{ry:.1}\" width=\"12\" height=\"12\" fill=\"{fill}\"/>\
             <text x=\"{tx:.1}\" y=\"{ty:.1}\" font-size=\"{FONT}\" fill=\"{INK}\">{}</text>",
            esc(name),
            ry = y + 4.0,
            tx = x + 16.0,
            ty = y + 14.0,
        );
    }
    by + 24.0
}

/// The picture under its title, and its numbers. (A `div`, not a
/// `figure`: a figure's default side margins would narrow the drawing on
/// a phone, and no style may undo them here.)
fn framed(c: &Chart, height: f64, drawing: &str) -> String {
    let mut out = format!(
        "<div class=\"chart\"><h2>{title}</h2>\
         <svg viewBox=\"0 0 {WIDTH} {height:.0}\" width=\"100%\" role=\"img\" aria-label=\"{title}. {summary}\">{drawing}</svg>",
        title = esc(&c.title),
        summary = c.summary,
    );
    if let Some(table) = &c.table {
        let _ = write!(
            out,
            "<details><summary>{}</summary><table><caption>{}</caption><thead><tr>",
            t(c.lang, "chart_numbers"),
            esc(&table.caption)
        );
        for h in &table.head {
            let _ = write!(out, "<th>{}</th>", esc(h));
        }
        out.push_str("</tr></thead><tbody>");
        for row in &table.rows {
            out.push_str("<tr>");
            for cell in row {
                let _ = write!(out, "<td>{}</td>", esc(cell));
            }
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table></details>");
    }
    out.push_str("</div>");
    out
}

/// What shows when there is nothing to draw: the title and a sentence.
fn empty(c: &Chart) -> String {
    format!(
        "<div class=\"chart\"><h2>{}</h2><p>{}</p></div>",
        esc(&c.title),
        t(c.lang, "chart_empty")
    )
}

/// A column per bar (days, oldest first), the value axis on the left; as
/// many bar names under the axis as fit, counted back from the last.
pub fn columns(c: &Chart) -> String {
    if is_empty(c) {
        return empty(c);
    }
    let ticks = ticks(c.scale, largest(c));
    let top = *ticks.last().unwrap_or(&1.0);
    let tick_text: Vec<String> = ticks.iter().map(|v| (c.tick)(*v)).collect();
    let left = tick_text.iter().map(|s| text_width(s)).fold(0.0, f64::max) + 10.0;
    let right = WIDTH - 4.0;
    let mut out = String::new();
    let plot_top = legend(&mut out, c) + FONT;
    let base = plot_top + PLOT;
    let y_of = |v: f64| base - v.max(0.0).min(top) / top * PLOT;
    out.push_str(&format!("<g class=\"grid\" stroke=\"{GRID}\">"));
    for v in &ticks {
        let _ = write!(
            out,
            "<line x1=\"{left:.1}\" y1=\"{y:.1}\" x2=\"{right:.1}\" y2=\"{y:.1}\"/>",
            y = y_of(*v)
        );
    }
    out.push_str("</g>");
    for (v, s) in ticks.iter().zip(&tick_text) {
        let _ = write!(
            out,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{FONT}\" text-anchor=\"end\" fill=\"{MUTED}\">{}</text>",
            esc(s),
            x = left - 5.0,
            y = y_of(*v) + 4.0,
        );
    }
    let n = c.bars.len().max(1);
    let slot = (right - left) / n as f64;
    let previous = has_previous(c);
    let width = slot * if previous { 0.45 } else { 0.7 };
    for (i, b) in c.bars.iter().enumerate() {
        let cx = left + slot * (i as f64 + 0.5);
        // The whole column answers a hover, even where its bar is short.
        let _ = write!(
            out,
            "<g><title>{}</title><rect x=\"{x:.1}\" y=\"{plot_top:.1}\" width=\"{slot:.1}\" height=\"{PLOT:.1}\" fill=\"#ffffff\" fill-opacity=\"0\"/>",
            b.says,
            x = cx - slot / 2.0,
        );
        if let Some(p) = b.previous.filter(|_| previous) {
            let _ = write!(
                out,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{BEFORE}\"/>",
                x = cx - width,
                y = y_of(p),
                w = width,
                h = base - y_of(p),
            );
        }
        if let Some(v) = b.value {
            let x = if previous { cx } else { cx - width / 2.0 };
            let _ = write!(
                out,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{width:.1}\" height=\"{h:.1}\" fill=\"{THIS}\"/>",
                y = y_of(v),
                h = base - y_of(v),
            );
        }
        out.push_str("</g>");
    }
    let _ = write!(
        out,
        "<line x1=\"{left:.1}\" y1=\"{base:.1}\" x2=\"{right:.1}\" y2=\"{base:.1}\" stroke=\"{MUTED}\"/>"
    );
    let widest = c
        .bars
        .iter()
        .map(|b| text_width(&b.label))
        .fold(0.0, f64::max);
    let every = ((widest + 8.0) / slot).ceil().max(1.0) as usize;
    for (i, b) in c.bars.iter().enumerate() {
        if (n - 1 - i).is_multiple_of(every) && !b.label.is_empty() {
            text_at(
                &mut out,
                left + slot * (i as f64 + 0.5),
                base + FONT + 4.0,
                INK,
                &b.label,
            );
        }
    }
    framed(c, base + FONT + 10.0, &out)
}

/// A row per bar (operators, categories): its name and value written above
/// it, this period's bar and the previous period's thinner one below; the
/// value axis along the bottom.
pub fn rows(c: &Chart) -> String {
    if is_empty(c) {
        return empty(c);
    }
    let ticks = ticks(c.scale, largest(c));
    let top = *ticks.last().unwrap_or(&1.0);
    let (left, right) = (4.0, WIDTH - 4.0);
    let x_of = |v: f64| left + v.max(0.0).min(top) / top * (right - left);
    let previous = has_previous(c);
    let row = if previous { 44.0 } else { 34.0 };
    let mut out = String::new();
    let first = legend(&mut out, c) + 4.0;
    let bottom = first + row * c.bars.len() as f64;
    out.push_str(&format!("<g class=\"grid\" stroke=\"{GRID}\">"));
    for v in &ticks {
        let _ = write!(
            out,
            "<line x1=\"{x:.1}\" y1=\"{first:.1}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\"/>",
            x = x_of(*v)
        );
    }
    out.push_str("</g>");
    for (i, b) in c.bars.iter().enumerate() {
        let y = first + row * i as f64;
        let _ = write!(
            out,
            "<g><title>{says}</title><rect x=\"{left}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{row:.1}\" fill=\"#ffffff\" fill-opacity=\"0\"/>\
             <text x=\"{left}\" y=\"{ty:.1}\" font-size=\"{FONT}\" fill=\"{INK}\">{label}</text>\
             <text x=\"{right}\" y=\"{ty:.1}\" font-size=\"{FONT}\" text-anchor=\"end\" fill=\"{INK}\">{value}</text>",
            says = b.says,
            w = right - left,
            ty = y + 13.0,
            label = esc(&b.label),
            value = esc(&b.value_text),
        );
        if let Some(v) = b.value {
            let _ = write!(
                out,
                "<rect x=\"{left}\" y=\"{by:.1}\" width=\"{w:.1}\" height=\"12\" fill=\"{THIS}\"/>",
                by = y + 18.0,
                w = x_of(v) - left,
            );
        }
        if let Some(p) = b.previous.filter(|_| previous) {
            let _ = write!(
                out,
                "<rect x=\"{left}\" y=\"{by:.1}\" width=\"{w:.1}\" height=\"7\" fill=\"{BEFORE}\"/>",
                by = y + 31.0,
                w = x_of(p) - left,
            );
        }
        out.push_str("</g>");
    }
    let _ = write!(
        out,
        "<line x1=\"{left}\" y1=\"{bottom:.1}\" x2=\"{right}\" y2=\"{bottom:.1}\" stroke=\"{MUTED}\"/>"
    );
    for v in &ticks {
        text_at(
            &mut out,
            x_of(*v),
            bottom + FONT + 4.0,
            MUTED,
            &(c.tick)(*v),
        );
    }
    framed(c, bottom + FONT + 10.0, &out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(label: &str, value: Option<f64>, previous: Option<f64>) -> Bar {
        Bar {
            label: label.into(),
            value,
            previous,
            value_text: format!("{value:?}"),
            says: format!("{label} &amp; more"),
        }
    }

    fn chart<'a>(
        scale: Scale,
        bars: Vec<Bar>,
        tick: &'a dyn Fn(f64) -> String,
        legend: bool,
    ) -> Chart<'a> {
        Chart {
            lang: Lang::En,
            title: "Volume <per> day".into(),
            summary: "Total &lt;3".into(),
            scale,
            tick,
            bars,
            legend: legend.then(|| ["This".to_string(), "Before".to_string()]),
            table: Some(Table {
                caption: "Volume per day".into(),
                head: vec!["Day".into(), "Volume".into()],
                rows: vec![vec!["Dec 5".into(), "12,500 XOF".into()]],
            }),
        }
    }

    /// The `y` of each gridline, top first.
    fn gridlines(svg: &str) -> Vec<String> {
        let grid = svg.split("<g class=\"grid\"").nth(1).unwrap();
        let grid = &grid[..grid.find("</g>").unwrap()];
        grid.split("<line")
            .skip(1)
            .map(|l| {
                l.split("y1=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn ticks_are_round_numbers_from_zero_to_at_least_the_largest() {
        crate::words::add();
        assert_eq!(
            ticks(Scale::Fit, 12_500.0),
            [0.0, 5_000.0, 10_000.0, 15_000.0]
        );
        assert_eq!(ticks(Scale::Fit, 10_000.0), [0.0, 5_000.0, 10_000.0]);
        assert_eq!(ticks(Scale::Fit, 7.0), [0.0, 2.0, 4.0, 6.0, 8.0]);
        assert_eq!(ticks(Scale::Fit, 3.0), [0.0, 1.0, 2.0, 3.0]);
        assert_eq!(ticks(Scale::Fit, 1.0), [0.0, 1.0], "counts: whole steps");
        assert_eq!(
            ticks(Scale::Fit, 1_730_000.0),
            [0.0, 500_000.0, 1_000_000.0, 1_500_000.0, 2_000_000.0]
        );
        assert_eq!(ticks(Scale::Fit, 0.0), [0.0, 1.0]);
        assert_eq!(ticks(Scale::Fit, f64::NAN), [0.0, 1.0]);
    }

    #[test]
    fn a_rate_is_drawn_on_0_to_100_whatever_its_values() {
        crate::words::add();
        assert_eq!(ticks(Scale::Percent, 12.0), [0.0, 25.0, 50.0, 75.0, 100.0]);
        let tick = |v: f64| percent(Lang::Fr, v);
        let svg = columns(&chart(
            Scale::Percent,
            vec![bar("a", Some(50.0), None), bar("b", Some(0.0), None)],
            &tick,
            false,
        ));
        for label in [
            "0\u{a0}%",
            "25\u{a0}%",
            "50\u{a0}%",
            "75\u{a0}%",
            "100\u{a0}%",
        ] {
            assert!(
                svg.contains(&format!(">{label}</text>")),
                "{label} in {svg}"
            );
        }
        assert_eq!(gridlines(&svg).len(), 5);
        // 50 % is half the plot's 150 units; a rate of 0 is a fact, drawn flat.
        assert!(svg.contains("height=\"75.0\" fill=\"#12355b\""), "{svg}");
        assert!(svg.contains("height=\"0.0\" fill=\"#12355b\""), "{svg}");
        assert_eq!(percent(Lang::En, 97.5), "97.5%");
        assert_eq!(percent(Lang::Fr, 97.5), "97,5\u{a0}%");
    }

    #[test]
    fn columns_have_an_axis_with_gridlines_labels_that_fit_and_the_previous_period() {
        crate::words::add();
        let tick = |v: f64| format::group(Lang::En, v as i64);
        let bars: Vec<Bar> = (0..30)
            .map(|i| bar(&format!("Dec {i}"), Some(i as f64 * 400.0), Some(1000.0)))
            .collect();
        let svg = columns(&chart(Scale::Fit, bars, &tick, true));
        for label in ["0", "5,000", "10,000", "15,000"] {
            assert!(
                svg.contains(&format!(">{label}</text>")),
                "{label} in {svg}"
            );
        }
        let y = gridlines(&svg);
        assert_eq!(y.len(), 4, "{svg}");
        assert!(y.windows(2).all(|w| w[0] != w[1]));
        // 30 names of 6 characters fit one in six, the last day always.
        assert!(svg.contains(">Dec 29</text>") && svg.contains(">Dec 23</text>"));
        assert!(!svg.contains(">Dec 28</text>") && !svg.contains(">Dec 24</text>"));
        assert_eq!(svg.matches("fill=\"#9db3cc\"").count(), 31, "30 + legend");
        assert!(svg.contains(">This</text>") && svg.contains(">Before</text>"));
        assert!(svg.contains("role=\"img\" aria-label=\"Volume &lt;per&gt; day. Total &lt;3\""));
        assert!(svg.contains("<title>Dec 3 &amp; more</title>"));
        assert!(svg.contains("viewBox=\"0 0 360 ") && svg.contains("width=\"100%\""));
        assert!(svg.contains(
            "<details><summary>Show the numbers</summary><table><caption>Volume per day</caption>\
             <thead><tr><th>Day</th><th>Volume</th></tr></thead><tbody><tr><td>Dec 5</td><td>12,500 XOF</td></tr>"
        ));
    }

    #[test]
    fn nothing_to_draw_says_so_without_dividing_by_zero() {
        crate::words::add();
        let tick = |v: f64| format::group(Lang::Fr, v as i64);
        for draw in [columns, rows] {
            let html = draw(&chart(
                Scale::Fit,
                vec![bar("a", Some(0.0), Some(0.0)), bar("b", None, None)],
                &tick,
                true,
            ));
            assert!(!html.contains("<svg") && !html.contains("NaN"), "{html}");
            assert!(html.contains("<p>Nothing to show yet: no figures in this period.</p>"));
            let none = draw(&chart(Scale::Fit, vec![], &tick, false));
            assert!(none.contains("Nothing to show yet"));
            let no_rate = draw(&chart(
                Scale::Percent,
                vec![bar("a", None, None)],
                &tick,
                false,
            ));
            assert!(no_rate.contains("Nothing to show yet"));
        }
    }

    #[test]
    fn rows_name_each_bar_and_write_its_value_beside_it() {
        crate::words::add();
        let tick = |v: f64| format::group(Lang::En, v as i64);
        let svg = rows(&chart(
            Scale::Fit,
            vec![
                bar("mtn-bj", Some(12_500.0), Some(5_000.0)),
                bar("(not chosen yet)", Some(0.0), None),
            ],
            &tick,
            true,
        ));
        assert!(svg.contains(">mtn-bj</text>") && svg.contains(">Some(12500.0)</text>"));
        assert!(svg.contains(">(not chosen yet)</text>"));
        assert_eq!(gridlines(&svg).len(), 4, "{svg}");
        assert!(svg.contains(">15,000</text>"));
        // 12,500 of 15,000 on 352 units; the previous period's 5,000 below.
        assert!(svg.contains("width=\"293.3\" height=\"12\""), "{svg}");
        assert!(svg.contains("width=\"117.3\" height=\"7\""), "{svg}");
    }
}
