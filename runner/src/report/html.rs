//! html (in progress).
pub fn render(_tl: &super::timeline::Timeline, _info: &super::RunInfo) -> String {
    String::new()
}
