//! Findings written as Parquet read back with the parquet crate's own reader
//! (the CLI test `parquet_reads_back_with_pyarrow` reads them with pyarrow).

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use pcapsleuth_core::{Finding, FlowRef, Protocol, Severity};
use pcapsleuth_report::{CaptureReport, Report, SCHEMA_VERSION};

fn report() -> Report {
    let flow = FlowRef {
        protocol: Protocol::Tcp,
        client: "128.232.110.120".into(),
        client_port: 34855,
        server: "66.35.250.204".into(),
        server_port: 80,
    };
    let findings = vec![
        Finding::builder("syn-retransmit", Severity::Error)
            .summary("never answered")
            .flow(Some(flow))
            .tcp_stream(3u64)
            .frames(vec![4u64, 9])
            .span(1_000, 2_000)
            .remedy("fix it")
            .build(),
        Finding::builder("frag-needed", Severity::Info)
            .summary("no flow")
            .frames(vec![7u64])
            .build(),
    ];
    Report {
        schema_version: SCHEMA_VERSION,
        captures: vec![CaptureReport {
            path: "a.pcap".into(),
            format: Some("pcap".into()),
            packets: 9,
            first_ts_ns: 0,
            last_ts_ns: 0,
            interfaces: vec![],
            tcp_streams: 4,
            warnings: vec![],
            error: None,
            incomplete: None,
            capture_quality: None,
            findings,
            flows: vec![],
            sources: vec![],
        }],
    }
}

#[test]
fn findings_read_back() {
    let path = std::env::temp_dir().join(format!("pcapsleuth-pq-{}.parquet", std::process::id()));
    let file = std::fs::File::create(&path).unwrap();
    pcapsleuth_parquet_out::write_findings(&report(), file).unwrap();
    let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
    assert_eq!(reader.metadata().file_metadata().num_rows(), 2);
    let rows: Vec<_> = reader
        .get_row_iter(None)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let get = |r: usize, name: &str| {
        rows[r]
            .get_column_iter()
            .find(|(n, _)| n.as_str() == name)
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    assert_eq!(get(0, "detector"), Field::Str("syn-retransmit".into()));
    assert_eq!(get(0, "severity"), Field::Str("error".into()));
    assert_eq!(get(0, "client_port"), Field::Int(34855));
    assert_eq!(get(0, "tcp_stream"), Field::Long(3));
    assert_eq!(get(0, "first_frame"), Field::Long(4));
    assert_eq!(get(0, "start_ts_ns"), Field::Long(1_000));
    assert_eq!(
        get(0, "community_id"),
        Field::Str("1:LQU9qZlK+B5F3KDmev6m5PMibrg=".into())
    );
    assert_eq!(get(1, "community_id"), Field::Null);
    assert_eq!(get(1, "client"), Field::Null);
    assert_eq!(get(1, "evidence"), Field::Str("{}".into()));
    let _ = std::fs::remove_file(&path);
}
