//! The Kafka listener at the protocol level, against a running `broker-fs serve --kafka`:
//! malformed frames, unknown APIs and versions, huge declared lengths and truncated
//! requests each get an error response or a closed connection with the reason logged;
//! the server keeps serving its other connections; and nothing is written.

mod common;

use bytes::{Buf, Bytes, BytesMut};
use common::{TempDir, BIN};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);

/// `broker-fs serve --kafka 127.0.0.1:0`, its standard input and the Kafka address.
struct Server {
    child: Child,
    stdin: ChildStdin,
    lines: std::sync::mpsc::Receiver<Value>,
    address: String,
    stderr: std::path::PathBuf,
}

impl Server {
    fn start(dir: &TempDir) -> Server {
        let stderr = dir.path().with_extension("stderr");
        let mut child = Command::new(BIN)
            .arg("--data-dir")
            .arg(dir.path())
            .args(["serve", "--kafka", "127.0.0.1:0"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(serde_json::from_str::<Value>(&line).unwrap());
            }
        });
        let mut server = Server { child, stdin, lines, address: String::new(), stderr };
        loop {
            let event = server.line();
            if event["event"] == "kafka-listening" {
                server.address = event["address"].as_str().unwrap().to_string();
                return server;
            }
        }
    }

    fn line(&self) -> Value {
        self.lines.recv_timeout(TIMEOUT).expect("a line from serve")
    }

    /// The live topics and their high watermarks, by the JSON status request.
    fn status(&mut self) -> Value {
        writeln!(self.stdin, r#"{{"id": "s", "status": true}}"#).unwrap();
        loop {
            let line = self.line();
            if line["id"] == "s" {
                return line["status"].clone();
            }
        }
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(&self.address).unwrap();
        s.set_read_timeout(Some(TIMEOUT)).unwrap();
        s
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A request frame: size, header, body.
fn frame<R: Encodable + HeaderVersion>(key: ApiKey, version: i16, correlation_id: i32, body: &R) -> Vec<u8> {
    let mut buf = BytesMut::new();
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("protocol-test")));
    header.encode(&mut buf, R::header_version(version)).unwrap();
    body.encode(&mut buf, version).unwrap();
    let mut out = (buf.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&buf);
    out
}

/// Reads one response frame: its correlation id and body (after the header).
fn response<R: Decodable + HeaderVersion>(s: &mut TcpStream, version: i16) -> (i32, R) {
    let mut size = [0; 4];
    s.read_exact(&mut size).expect("a response");
    let mut body = vec![0; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body).unwrap();
    let mut buf = Bytes::from(body);
    let header = ResponseHeader::decode(&mut buf, R::header_version(version)).unwrap();
    let r = R::decode(&mut buf, version).unwrap();
    assert!(!buf.has_remaining(), "bytes after the response");
    (header.correlation_id, r)
}

/// Whether the server closed the connection (end of stream, or reset) without a response.
fn closed(s: &mut TcpStream) -> bool {
    let mut byte = [0; 1];
    match s.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock && e.kind() != std::io::ErrorKind::TimedOut,
    }
}

/// A record batch, as a producer encodes it, with one byte of its value flipped.
fn rotten_batch() -> Vec<u8> {
    use kafka_protocol::records::*;
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1,
        key: None,
        value: Some(Bytes::from_static(b"value")),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, [&record], &options).unwrap();
    let mut bytes = buf.to_vec();
    *bytes.last_mut().unwrap() ^= 0x20;
    bytes
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn metadata(s: &mut TcpStream, correlation_id: i32) -> MetadataResponse {
    s.write_all(&frame(ApiKey::Metadata, 12, correlation_id, &MetadataRequest::default().with_topics(None))).unwrap();
    let (id, r) = response::<MetadataResponse>(s, 12);
    assert_eq!(id, correlation_id);
    r
}

#[test]
fn bad_frames_close_their_connection_with_a_reason_and_write_nothing() {
    let dir = TempDir::new("kafka-protocol");
    let mut server = Server::start(&dir);
    let mut good = server.connect();
    let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name("t"))
        .with_num_partitions(2)
        .with_replication_factor(1)]);
    good.write_all(&frame(ApiKey::CreateTopics, 7, 1, &create)).unwrap();
    let (_, created) = response::<CreateTopicsResponse>(&mut good, 7);
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");

    // Each case: bytes sent, then the reason the log must give.
    let short_header = [&3i32.to_be_bytes()[..], &[0, 0, 0]].concat();
    let unknown_api =
        [&8i32.to_be_bytes()[..], &999i16.to_be_bytes(), &0i16.to_be_bytes(), &7i32.to_be_bytes()].concat();
    let find_coordinator = frame(ApiKey::FindCoordinator, 1, 8, &FindCoordinatorRequest::default());
    let old_produce = {
        let mut f = frame(ApiKey::Produce, 3, 9, &ProduceRequest::default());
        f[6..8].copy_from_slice(&2i16.to_be_bytes()); // Produce v2, below the served v3
        f
    };
    let huge_array = {
        let mut f = frame(ApiKey::Metadata, 1, 10, &MetadataRequest::default().with_topics(Some(vec![])));
        let at = f.len() - 4;
        f[at..].copy_from_slice(&i32::MAX.to_be_bytes());
        f
    };
    let garbage_body = [
        &12i32.to_be_bytes()[..],
        &3i16.to_be_bytes(),
        &1i16.to_be_bytes(),
        &11i32.to_be_bytes(),
        &(-2i32).to_be_bytes(),
    ]
    .concat();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("negative size", (-1i32).to_be_bytes().to_vec(), "a frame declares -1 bytes"),
        ("huge size", i32::MAX.to_be_bytes().to_vec(), "over the limit"),
        ("short header", short_header, "too short for a request header"),
        ("unknown API", unknown_api, "API key 999 is unknown"),
        ("unserved API", find_coordinator, "FindCoordinator (API key 10) is not served here"),
        ("old version", old_produce, "Produce version 2 is not supported"),
        ("huge array", huge_array, "malformed Metadata v1 request"),
        ("garbage body", garbage_body, "malformed Metadata v1 request"),
    ];
    for (what, bytes, reason) in &cases {
        let mut s = server.connect();
        s.write_all(bytes).unwrap();
        assert!(closed(&mut s), "{what}: the connection stays open");
        // The server goes on serving the good connection.
        assert_eq!(metadata(&mut good, 2).topics.len(), 1, "{what}");
        assert!(server.log().contains(reason), "{what}: no {reason:?} in the log:\n{}", server.log());
    }

    // A request cut short by the client closing its side.
    let mut s = server.connect();
    let whole = frame(ApiKey::Metadata, 12, 12, &MetadataRequest::default().with_topics(None));
    s.write_all(&whole[..whole.len() - 3]).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(closed(&mut s));
    assert!(metadata(&mut good, 3).topics.len() == 1);
    assert!(server.log().contains("the connection ended inside a request"), "{}", server.log());

    // A newer ApiVersions than served gets UNSUPPORTED_VERSION in a version 0 answer.
    let mut s = server.connect();
    let mut newer = frame(ApiKey::ApiVersions, 3, 13, &ApiVersionsRequest::default());
    newer[6..8].copy_from_slice(&99i16.to_be_bytes());
    s.write_all(&newer).unwrap();
    let (id, versions) = response::<ApiVersionsResponse>(&mut s, 0);
    assert_eq!((id, versions.error_code), (13, 35));
    assert!(versions.api_keys.iter().any(|k| k.api_key == ApiKey::Produce as i16 && k.max_version == 12));

    // A produce whose batch fails its CRC is refused with CORRUPT_MESSAGE.
    let produce = ProduceRequest::default().with_acks(-1).with_topic_data(vec![TopicProduceData::default()
        .with_name(name("t"))
        .with_partition_data(vec![PartitionProduceData::default()
            .with_index(0)
            .with_records(Some(Bytes::from(rotten_batch())))])]);
    good.write_all(&frame(ApiKey::Produce, 9, 14, &produce)).unwrap();
    let (_, produced) = response::<ProduceResponse>(&mut good, 9);
    let p = &produced.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 2, "{p:?}");
    assert!(p.error_message.as_deref().unwrap_or("").contains("CRC"), "{p:?}");

    // Nothing reached the broker: one topic, nothing in it.
    let status = server.status();
    assert_eq!(status["topics"].as_array().unwrap().len(), 1, "{status}");
    assert_eq!(status["topics"][0]["high_watermarks"], serde_json::json!([0, 0]), "{status}");
}

/// Requests sent back to back on one connection are answered in the order sent.
#[test]
fn pipelined_requests_are_answered_in_order() {
    let dir = TempDir::new("kafka-pipeline");
    let server = Server::start(&dir);
    let mut s = server.connect();
    let mut burst = Vec::new();
    for id in 0..40 {
        if id % 2 == 0 {
            burst.extend(frame(ApiKey::ApiVersions, 3, id, &ApiVersionsRequest::default()));
        } else {
            burst.extend(frame(ApiKey::Metadata, 12, id, &MetadataRequest::default().with_topics(None)));
        }
    }
    s.write_all(&burst).unwrap();
    for id in 0..40 {
        let got = if id % 2 == 0 {
            response::<ApiVersionsResponse>(&mut s, 3).0
        } else {
            response::<MetadataResponse>(&mut s, 12).0
        };
        assert_eq!(got, id);
    }
    let mut rest = Vec::new();
    s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let _ = s.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{} bytes more than 40 responses", rest.len());
}
