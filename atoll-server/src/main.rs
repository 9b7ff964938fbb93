//! `atoll-server [config-file] [--directive value ...]`, like `redis-server`.

#[global_allocator]
static GLOBAL: atoll::alloc::Counting = atoll::alloc::Counting;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // A background child (BGSAVE, BGREWRITEAOF) started by a server: it only writes a file.
    if args.first().is_some_and(|a| a == atoll::persist::child::CHILD_FLAG) {
        std::process::exit(atoll::persist::child::main(&args[1..]));
    }
    if let Some(a) = args.first() {
        if a == "-v" || a == "--version" {
            println!("Atoll server v={} (redis_version={}) bits=64", env!("CARGO_PKG_VERSION"), atoll::REDIS_VERSION);
            return;
        }
        if a == "-h" || a == "--help" {
            println!("Usage: atoll-server [/path/to/atoll.conf] [options] [-]");
            println!("       atoll-server - (read config from stdin)");
            println!("       atoll-server -v or --version");
            println!("       atoll-server -h or --help");
            println!();
            println!("Examples:");
            println!("       atoll-server (run the server with default config)");
            println!("       atoll-server /etc/redis/6379.conf");
            println!("       atoll-server --port 7777");
            println!("       atoll-server /etc/myredis.conf --loglevel verbose --threads 4");
            return;
        }
    }
    // Before any thread: the process title's memory is taken over (the environment moved).
    atoll::config::process::init_title();
    match atoll::config::Config::from_args(&args) {
        Ok((cfg, warnings)) => std::process::exit(atoll::server::net::run(cfg, warnings)),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
