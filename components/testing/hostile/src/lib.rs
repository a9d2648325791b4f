//! A misbehaving API surface for isolation tests. Mounted by tests under a
//! route of their choosing; the last path segment picks the misbehaviour.

wit_bindgen::generate!({
    path: ["../../../wit/platform", "../../../wit/adapter", "../../../wit/api"],
    world: "mmc:api/surface",
    generate_all,
});

use exports::mmc::api::handler::Guest;
use mmc::api::http_types::{Caller, Request, Response};

struct Hostile;

fn ok(body: &str) -> Response {
    Response {
        status: 200,
        headers: vec![("content-type".into(), "text/plain".into())],
        body: body.as_bytes().to_vec(),
    }
}

impl Guest for Hostile {
    fn handle(_caller: Option<Caller>, req: Request) -> Response {
        match req.path.rsplit('/').next().unwrap_or_default() {
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "alloc" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "panic" => panic!("hostile component panics on purpose"),
            "slow" => {
                // Computes for 120 ms (well within its deadline), then answers.
                let until = mmc::platform::clock::now_ms() + 120;
                let mut n: u64 = 0;
                while mmc::platform::clock::now_ms() < until {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
                ok("slow but done")
            }
            "stderr" => {
                eprintln!("a line on stderr, which the host discards");
                ok("wrote to stderr")
            }
            "storage" => {
                // Leaves a transaction open and traps: the host must roll it back and free the writer.
                let tx = mmc::platform::storage::begin().expect("begin");
                tx.put("t", "k", b"v").expect("put");
                std::mem::forget(tx);
                panic!("trap with an open transaction");
            }
            _ => ok("ok"),
        }
    }
}

export!(Hostile);
