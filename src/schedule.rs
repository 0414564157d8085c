//! Learning-rate schedules: the learning rate at each optimizer step.

use crate::config::Schedule;

/// Learning rate for `step` (0-based) of `steps`, starting from `lr`.
pub fn lr_at(schedule: Schedule, lr: f64, step: usize, steps: usize) -> f64 {
    match schedule {
        Schedule::Constant => lr,
        Schedule::Cosine => {
            let t = step as f64 / steps.max(1) as f64;
            0.5 * lr * (1.0 + (std::f64::consts::PI * t).cos())
        }
        Schedule::Step => {
            let t = step as f64 / steps.max(1) as f64;
            if t >= 0.75 {
                lr * 0.01
            } else if t >= 0.5 {
                lr * 0.1
            } else {
                lr
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_start_at_lr_and_decay() {
        for s in [Schedule::Constant, Schedule::Cosine, Schedule::Step] {
            assert_eq!(lr_at(s, 0.5, 0, 100), 0.5);
        }
        assert!(lr_at(Schedule::Cosine, 0.5, 99, 100) < 0.001);
        assert!((lr_at(Schedule::Step, 0.5, 60, 100) - 0.05).abs() < 1e-12);
        assert!((lr_at(Schedule::Step, 0.5, 80, 100) - 0.005).abs() < 1e-12);
    }
}
