//! `ferrofit devices [--json]`.

use clap::Args;
use ferrofit::backend::devices::Inventory;

/// Arguments of `devices`.
#[derive(Args, Debug)]
pub struct DevicesArgs {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// Lists devices.
pub fn run(a: DevicesArgs) -> anyhow::Result<()> {
    let inv = Inventory::probe();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&inv)?);
        return Ok(());
    }
    println!(
        "{:<8} {:>3}  {:<11} {:<8} {:>10}  {:<40} driver",
        "api", "#", "kind", "vendor", "memory", "name"
    );
    for d in &inv.devices {
        let mem = d
            .memory_bytes
            .map(|b| format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64))
            .unwrap_or_else(|| "?".into());
        let kind = serde_json::to_value(d.class)?
            .as_str()
            .unwrap_or_default()
            .to_string();
        println!(
            "{:<8} {:>3}  {:<11} {:<8} {:>10}  {:<40} {}",
            d.api, d.index, kind, d.vendor, mem, d.name, d.driver
        );
        if !d.features.is_empty() {
            println!("{:<14}features: {}", "", d.features.join(", "));
        }
        if let Some(b) = d.binding_bytes {
            // The fused engine's data is one buffer a column: this caps its N.
            let points = b / 4;
            println!(
                "{:<14}largest buffer a kernel binds: {} MiB ({points} points of one input)",
                "",
                b >> 20
            );
        }
    }
    for n in &inv.notes {
        println!("note: {n}");
    }
    Ok(())
}
