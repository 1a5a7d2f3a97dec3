//! A run's measurements: what each part of the benchmark adds, and what the
//! report and the CPU ceiling read back.

/// (measurement, server, median, unit) rows, in the order measured.
pub type Results = Vec<(String, String, f64, String)>;

/// The value of the first row whose measurement starts with `what` for
/// `server`.
pub fn get(r: &Results, what: &str, server: &str) -> Option<f64> {
    get_unit(r, what, server).map(|x| x.0)
}

/// [`get`] with the row's unit.
pub fn get_unit<'r>(r: &'r Results, what: &str, server: &str) -> Option<(f64, &'r str)> {
    r.iter()
        .find(|(w, s, v, _)| w.starts_with(what) && s == server && !v.is_nan())
        .map(|x| (x.2, x.3.as_str()))
}
