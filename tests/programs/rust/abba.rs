//! Two threads take two `std::sync::Mutex`es in opposite orders: under
//! some schedules each holds one and waits for the other.
use std::sync::{Arc, Mutex};
use std::thread;

fn main() {
    let a = Arc::new(Mutex::new(0u32));
    let b = Arc::new(Mutex::new(0u32));
    let (a2, b2) = (Arc::clone(&a), Arc::clone(&b));
    let t = thread::spawn(move || {
        let x = a2.lock().unwrap();
        let y = b2.lock().unwrap();
        assert_eq!(*x + *y, 0);
    });
    {
        let y = b.lock().unwrap();
        let x = a.lock().unwrap();
        assert_eq!(*x + *y, 0);
    }
    t.join().unwrap();
}
