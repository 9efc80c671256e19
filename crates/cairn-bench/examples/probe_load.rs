#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
fn main() {
    let dir = "/tmp/probe-load";
    let _ = std::fs::remove_dir_all(dir);
    let storage = cairn_storage::Storage::open(dir, Default::default()).unwrap();
    storage
        .create_dataset("u", cairn_bench::bigfun_users::gleambook_users_type(), None)
        .unwrap();
    let r = storage
        .load(
            "u",
            &["bench/data/gleambook-users-1000000-seed42.json".into()],
            None,
        )
        .unwrap();
    println!("{:?}", r);
}
