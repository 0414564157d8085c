//! `ferrofit cache [--clear]`: where compiled kernels are kept between runs,
//! how much each device's folder holds and whether it is intact.

use clap::Args;
use ferrofit::backend::kernel_cache;

/// Arguments of `cache`.
#[derive(Args, Debug)]
pub struct CacheArgs {
    /// Remove every cached kernel (the next GPU run compiles them again).
    #[arg(long)]
    clear: bool,
}

/// Shows or clears the kernel cache.
pub fn run(a: CacheArgs) -> anyhow::Result<()> {
    let root = kernel_cache::root();
    if a.clear {
        let (removed, busy) = kernel_cache::clear(&root)?;
        println!(
            "removed {} kernel folder(s) from {}",
            removed.len(),
            root.join("kernels").display()
        );
        for name in busy {
            println!("  left {name}: a running ferrofit is using it");
        }
        return Ok(());
    }
    println!("kernel cache: {}", kernel_cache::summary());
    let folders = kernel_cache::describe(&root);
    for (name, bytes, check) in folders {
        let health = match check {
            Ok(()) => "intact".to_string(),
            Err(why) => format!("{why}; rebuilt at its next use"),
        };
        println!("  {name}  {:.1} KiB  {health}", bytes as f64 / 1024.0);
    }
    Ok(())
}
