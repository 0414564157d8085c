//! Reports people look at: one self-contained HTML page ([`html`]) from run,
//! bench and doctor records, its charts drawn by [`crate::chart`].

pub mod html;
