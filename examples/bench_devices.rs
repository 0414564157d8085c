//! Time the seed job on every device this machine has, as `ferrofit bench`
//! does (a warm-up run, five timed runs, one run synced every step):
//! `cargo run --example bench_devices`.

use ferrofit::backend::{devices::Inventory, select};
use ferrofit::bench::measure::{measure, Plan};
use ferrofit::bench::stats::fmt_time;
use ferrofit::config::TrainConfig;
use ferrofit::trainer::Trainer;

fn main() -> ferrofit::Result<()> {
    let cfg = TrainConfig::default();
    for target in select::every_device(&Inventory::probe()) {
        let mut run = |c: &TrainConfig| {
            Trainer::new(c.clone(), target.clone())
                .run()
                .map(|r| r.outcome)
        };
        let plan = Plan { warmup: 1, runs: 5 };
        let row = measure(
            &mut run,
            &cfg,
            plan,
            "ferrofit",
            &target.label(),
            &target.info.name,
        )?;
        println!(
            "{:<8} {:<40} median {:>10}  loss {:.5}",
            row.backend,
            row.device,
            fmt_time(row.summary.median),
            row.final_loss
        );
    }
    Ok(())
}
