//! A small counter-based random number generator.
//!
//! Every random value in ferrofit (data noise, weight init, mini-batch order) is
//! `hash(seed, stream, index)`, so the same seed gives the same numbers on every
//! engine, backend and thread count.

/// SplitMix64 finaliser: a fast, well-mixed 64-bit hash.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform value in [0, 1) for (seed, stream, index).
#[inline]
pub fn uniform(seed: u64, stream: u64, index: u64) -> f64 {
    let h = mix64(
        seed ^ mix64(stream.wrapping_add(0x9e37_79b9_7f4a_7c15))
            ^ index.wrapping_mul(0xd1b5_4a32_d192_ed03),
    );
    (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Named streams, so that different uses of one seed never share numbers.
pub mod stream {
    /// Noise added to the target function.
    pub const NOISE: u64 = 1;
    /// Weight initialisation (offset by the layer index).
    pub const INIT: u64 = 100;
    /// Mini-batch shuffling (offset by the epoch).
    pub const SHUFFLE: u64 = 10_000;
    /// The validation split of user data.
    pub const SPLIT: u64 = 5_000;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_is_in_range_and_roughly_flat() {
        let n = 100_000;
        let mut buckets = [0usize; 10];
        for i in 0..n {
            let u = uniform(7, stream::NOISE, i);
            assert!((0.0..1.0).contains(&u));
            buckets[(u * 10.0) as usize] += 1;
        }
        for b in buckets {
            assert!((b as f64 - 10_000.0).abs() < 500.0, "bucket count {b}");
        }
    }

    #[test]
    fn streams_and_seeds_differ() {
        assert_ne!(uniform(1, 1, 5), uniform(2, 1, 5));
        assert_ne!(uniform(1, 1, 5), uniform(1, 2, 5));
        assert_eq!(uniform(3, 4, 5), uniform(3, 4, 5));
    }
}
