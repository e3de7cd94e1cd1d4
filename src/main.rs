//! The `tether` binary: parse arguments, set up logging, hand over to the library.

fn main() {
    let arg = std::env::args().nth(1);
    match arg.as_deref() {
        Some("version") | Some("--version") => println!("tether {}", env!("CARGO_PKG_VERSION")),
        _ => {
            eprintln!("usage: tether version");
            std::process::exit(2);
        }
    }
}
