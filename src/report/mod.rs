//! Reports people look at: a self-contained HTML page ([`html`], its charts in
//! [`svg`]) and plots drawn in the terminal ([`term`]).

pub mod html;
pub mod svg;
pub mod term;
