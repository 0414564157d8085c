//! Charts, one module for every picture ferrofit draws: the HTML report's
//! inline SVG charts (`inline`), the bench picture behind `bench --plot`
//! (`picture`, SVG or PNG), and the terminal plots (`term`). They share one
//! [`axis::Axis`] — ticks at round 1-2-5 values or whole decades, labels with
//! units — one palette and one escaping rule.

pub mod axis;
pub mod inline;
pub mod picture;
pub mod term;

/// Series colours, in order (the first is ferrofit's own rows).
pub const PALETTE: [&str; 6] = [
    "#3182ce", "#dd6b20", "#38a169", "#805ad5", "#d53f8c", "#718096",
];

/// The colour of a bench row named `name`: ferrofit's own, or a peer's.
pub fn row_color(name: &str) -> &'static str {
    if name.starts_with("ferrofit") {
        PALETTE[0]
    } else {
        PALETTE[5]
    }
}

/// Escapes text for SVG/XML/HTML.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}
