//! Which points each micro-batch uses.
//!
//! Full batch with no accumulation: every point, every step. With `--accumulate K`
//! and no `--batch-size`: the points split into K contiguous slices. With
//! `--batch-size B`: a fresh seeded permutation each epoch, cut into slices of B.

use crate::config::TrainConfig;
use crate::rng::{mix64, stream};

/// The points of one micro-batch.
#[derive(Clone, Debug, PartialEq)]
pub enum Batch {
    /// Points `start..end` in data order.
    Range(usize, usize),
    /// These point indices.
    Indices(Vec<u32>),
}

impl Batch {
    /// Number of points.
    pub fn len(&self) -> usize {
        match self {
            Batch::Range(s, e) => e - s,
            Batch::Indices(v) => v.len(),
        }
    }

    /// True when the batch has no points.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Plans the micro-batches of a run.
#[derive(Clone, Debug)]
pub struct BatchPlan {
    n: usize,
    micro: usize,
    accumulate: usize,
    shuffle: bool,
    seed: u64,
    cached_epoch: Option<(usize, Vec<u32>)>,
}

impl BatchPlan {
    /// The plan for a configuration.
    pub fn new(cfg: &TrainConfig) -> BatchPlan {
        let micro = match cfg.batch_size {
            Some(b) => b.min(cfg.n),
            None => cfg.n.div_ceil(cfg.accumulate),
        };
        BatchPlan {
            n: cfg.n,
            micro,
            accumulate: cfg.accumulate,
            shuffle: cfg.batch_size.is_some_and(|b| b < cfg.n),
            seed: cfg.seed,
            cached_epoch: None,
        }
    }

    /// Points in a full micro-batch.
    pub fn micro_size(&self) -> usize {
        self.micro
    }

    /// Micro-batches per optimizer step.
    pub fn accumulate(&self) -> usize {
        self.accumulate
    }

    /// True when every step uses all points in order (no index list needed).
    pub fn is_full_batch(&self) -> bool {
        self.micro >= self.n && self.accumulate == 1
    }

    /// Micro-batch `k` of optimizer step `step`.
    pub fn batch(&mut self, step: usize, k: usize) -> Batch {
        let per_epoch = self.n.div_ceil(self.micro);
        let g = step * self.accumulate + k;
        let (epoch, j) = (g / per_epoch, g % per_epoch);
        let (s, e) = (j * self.micro, ((j + 1) * self.micro).min(self.n));
        if !self.shuffle {
            return Batch::Range(s, e);
        }
        if self.cached_epoch.as_ref().map(|c| c.0) != Some(epoch) {
            self.cached_epoch = Some((epoch, permutation(self.n, self.seed, epoch)));
        }
        Batch::Indices(self.cached_epoch.as_ref().unwrap().1[s..e].to_vec())
    }
}

/// A seeded Fisher-Yates permutation of `0..n` for `epoch`.
fn permutation(n: usize, seed: u64, epoch: usize) -> Vec<u32> {
    let mut v: Vec<u32> = (0..n as u32).collect();
    let base = mix64(seed ^ (stream::SHUFFLE + epoch as u64));
    for i in (1..n).rev() {
        let j = (mix64(base ^ i as u64) % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_epoch_of_mini_batches_covers_every_point_once() {
        let cfg = TrainConfig {
            n: 103,
            batch_size: Some(10),
            ..TrainConfig::default()
        };
        let mut plan = BatchPlan::new(&cfg);
        let mut seen = vec![0; 103];
        for k in 0..11 {
            match plan.batch(0, k) {
                Batch::Indices(v) => v.iter().for_each(|&i| seen[i as usize] += 1),
                other => panic!("expected indices, got {other:?}"),
            }
        }
        assert!(seen.iter().all(|&c| c == 1));
        assert_ne!(plan.batch(11, 0), plan.batch(0, 0), "epochs reshuffle");
    }

    #[test]
    fn accumulation_splits_the_full_batch() {
        let cfg = TrainConfig {
            n: 10,
            accumulate: 3,
            ..TrainConfig::default()
        };
        let mut plan = BatchPlan::new(&cfg);
        let b: Vec<_> = (0..3).map(|k| plan.batch(0, k)).collect();
        assert_eq!(
            b,
            vec![Batch::Range(0, 4), Batch::Range(4, 8), Batch::Range(8, 10)]
        );
        assert!(!plan.is_full_batch());
    }
}
