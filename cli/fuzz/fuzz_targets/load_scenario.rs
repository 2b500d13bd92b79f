//! Feeds arbitrary bytes to the scenario loader: it must answer (a scenario or an error that names
//! the file), never panic; a scenario that loads is run briefly with every strategy it names.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(mut sc) = ordsim::load_text("fuzz.toml", text) else { return };
    sc.workload.messages = sc.workload.messages.min(100);
    sc.run.max_events = sc.run.max_events.min(100_000);
    let plan = sim::FaultPlan::resolve(&sc, 1);
    let opts = sim::RunOptions { seed: 1, max_events: None, max_sim_time: Some(3_600_000_000) };
    for name in sc.strategies.clone() {
        let _ = strategies::run_named(&name, &sc, &plan, &opts, None);
    }
});
