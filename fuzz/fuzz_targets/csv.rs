//! The CSV reader on arbitrary bytes: it may refuse, never panic, and what it
//! accepts is a rectangular table of finite numbers.
#![no_main]

use ferrofit_spec::csv;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for delimiter in [None, Some(','), Some(';')] {
        if let Ok(t) = csv::parse(text, "fuzz.csv", delimiter) {
            assert_eq!(t.values.len(), t.rows() * t.columns);
            assert!(t.values.iter().all(|v| v.is_finite()));
            if let Ok(cols) = t.select("fuzz.csv", "inputs", "0") {
                assert_eq!(t.gather(&cols).len(), t.rows());
            }
        }
    }
});
