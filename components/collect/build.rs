//! The OpenAPI document this component serves, minified into `OUT_DIR`:
//! every create instantiates the component, and a larger data segment (the
//! document is most of it) measurably slows each instantiation — the
//! pretty-printed file is for people, the served one for programs.

fn main() {
    let src = "api/openapi.json";
    println!("cargo:rerun-if-changed={src}");
    let text = std::fs::read_to_string(src).expect("api/openapi.json is readable");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("api/openapi.json is JSON");
    let out = std::path::Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("openapi.json");
    std::fs::write(
        out,
        serde_json::to_vec(&doc).expect("JSON values serialise"),
    )
    .expect("OUT_DIR is writable");
}
