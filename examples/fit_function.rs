//! Fit y = sin(3x) on 10,000 points with the library's front door, predict,
//! save and load back: `cargo run --example fit_function`.

use ferrofit::config::OptimizerKind;
use ferrofit::fit::{fit, FitError, Model, Options};

fn main() -> Result<(), FitError> {
    let x: Vec<f32> = (0..10_000).map(|i| i as f32 / 5_000.0 - 1.0).collect();
    let y: Vec<f32> = x.iter().map(|v| (3.0 * v).sin()).collect();
    let options = Options {
        hidden: 32,
        layers: 2,
        optimizer: OptimizerKind::Adam,
        lr: Some(0.01),
        steps: 500,
        ..Options::default()
    };
    let model = fit(&x, &y, 1, 1, &options)?;
    let probe = [-0.5f32, 0.0, 0.5];
    for (x, y) in probe.iter().zip(model.predict(&probe)?) {
        println!("f({x:+.1}) = {y:+.4}   (sin(3x) = {:+.4})", (3.0 * x).sin());
    }
    let dir = std::env::temp_dir().join(format!("ferrofit-example-{}", std::process::id()));
    model.save(&dir)?;
    let again = Model::load(&dir)?;
    assert_eq!(again.predict(&probe)?, model.predict(&probe)?);
    println!("saved to and loaded from {}", dir.display());
    Ok(())
}
