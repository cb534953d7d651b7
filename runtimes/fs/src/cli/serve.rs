//! `serve [--kafka ADDR]`: the JSON-lines protocol on standard input and output (the
//! library's [`broker_fs::serve`]), with the Kafka listener beside it if asked.

use super::failure::Failure;
use broker_fs::broker_loop::Input;
use broker_fs::driver::{Driver, DriverOptions};
use broker_fs::serve::{self, Outcome, ServeOptions};
use serde_json::json;
use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;

/// Serves until the end of input (with `kafka`, until a stop signal) or a halt.
/// `write_timeout_ms` cuts off a Kafka client that stops reading.
pub fn run(
    data_dir: &Path,
    options: DriverOptions,
    kafka: Option<&str>,
    write_timeout_ms: u64,
    out: &mut impl Write,
) -> Result<(), Failure> {
    // Bound before recovery, so that an address in use is reported at once.
    let listener = match kafka {
        Some(addr) => Some(
            TcpListener::bind(addr)
                .map_err(|e| Failure::new(format!("cannot listen for Kafka clients on {addr}: {e}")))?,
        ),
        None => None,
    };
    let write_timeout = Duration::from_millis(write_timeout_ms);
    // The core keeps consumer groups' committed offsets and idempotent producers' ids and
    // sequences: the group APIs and InitProducerId are served.
    let limits = broker_kafka::Limits {
        write_timeout,
        group_offsets: true,
        producers: true,
        ..broker_kafka::Limits::from(&options.config)
    };
    let mut serve_options = ServeOptions::for_config(&options.config);
    let driver = Driver::<Input>::open(data_dir, options)?;
    let kafka = match listener {
        Some(listener) => {
            let address = listener.local_addr()?;
            let stop = driver.mailbox();
            let kafka = broker_kafka::Kafka::start(listener, driver.mailbox(), limits, move || {
                stop.send(Input::Stop);
            })?;
            serve_options.outlive_input = true;
            serve_options.ready_events.push(json!({ "event": "kafka-listening", "address": address.to_string() }));
            Some(kafka)
        }
        None => None,
    };
    let stdin = std::io::BufReader::new(std::io::stdin());
    let outcome = serve::serve(driver, stdin, out, &mut std::io::stderr(), serve_options);
    if let Some(kafka) = kafka {
        kafka.stop();
    }
    match outcome {
        Outcome::Finished => Ok(()),
        Outcome::Halted(reason) => Err(Failure::halted(&reason)),
        Outcome::OutputClosed(e) => Err(e.into()),
    }
}
