//! `mmc`: the service binary. It wires the console's pages into the command
//! line and the server ([`mmc_cli`]), which do not depend on them: an edit to
//! a console page rebuilds `mmc-console` and this file, then the link.

fn main() {
    mmc_cli::main(std::sync::Arc::new(mmc_console::Pages));
}
