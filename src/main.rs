fn main() {
    println!("holdfast");
}
