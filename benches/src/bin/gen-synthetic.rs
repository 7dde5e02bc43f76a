//! `gen-synthetic OUT [MEGABYTES]`: write the benchmark's synthetic capture
//! (see `pcapsleuth_benches::write_synthetic_pcap`) to OUT.

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(out) = args.next() else {
        eprintln!("usage: gen-synthetic OUT [MEGABYTES]");
        std::process::exit(2);
    };
    let mb: u64 = args
        .next()
        .and_then(|s| s.to_str()?.parse().ok())
        .unwrap_or(64);
    match pcapsleuth_benches::write_synthetic_pcap(
        out.as_ref(),
        mb * 1024 * 1024,
        pcapsleuth_benches::DEFAULT_CONCURRENCY,
    ) {
        Ok(s) => println!(
            "{}: {} bytes, {} packets, {} connections",
            out.to_string_lossy(),
            s.bytes,
            s.packets,
            s.connections
        ),
        Err(e) => {
            eprintln!("gen-synthetic: {e}");
            std::process::exit(1);
        }
    }
}
