//! Test support: docs/TIER.md's tables of on-store structs checked
//! against the structs (one row per field: struct, field, offset, size).

/// A field as the struct has it: struct, field, offset, size.
pub(crate) type Field = (&'static str, &'static str, usize, usize);

/// Every table row of docs/TIER.md whose struct is in `fields` matches it,
/// and each struct has no row the list lacks.
pub(crate) fn assert_doc_tables_match(fields: &[Field]) {
    let doc = include_str!("../../docs/TIER.md");
    let structs: Vec<&str> = fields.iter().map(|f| f.0).collect();
    let rows: Vec<Vec<&str>> = doc
        .lines()
        .map(|l| {
            l.split('|')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect::<Vec<_>>()
        })
        .filter(|r| r.len() >= 4 && structs.contains(&r[0]))
        .collect();
    assert_eq!(
        rows.len(),
        fields.len(),
        "a row too many or too few in docs/TIER.md"
    );
    for (s, f, off, size) in fields {
        let row = rows
            .iter()
            .find(|r| r[0] == *s && r[1] == *f)
            .unwrap_or_else(|| panic!("docs/TIER.md has no row for {s}.{f}"));
        assert_eq!(row[2].parse::<usize>().ok(), Some(*off), "{s}.{f} offset");
        assert_eq!(row[3].parse::<usize>().ok(), Some(*size), "{s}.{f} size");
    }
}
