use super::*;

#[test]
fn table_cells_carry_their_column_name() {
    let page = "<p>x</p><table><thead><tr><th>Ref</th><th><abbr title=\"a\">Amt</abbr></th></tr></thead>\
                <tbody><tr><td><a href=\"/p\">r1</a></td><td>5</td></tr>\
                <tr><td colspan=\"2\">total</td></tr></tbody>\
                <tfoot><tr><th>All</th><td>9</td></tr></tfoot></table><td>";
    let out = label_cells(page);
    assert!(out.contains("<table tabindex=\"0\">"), "{out}");
    assert!(
        out.contains(
            "<td data-label=\"Ref\"><a href=\"/p\">r1</a></td><td data-label=\"Amt\">5</td>"
        ),
        "{out}"
    );
    assert!(out.contains("<td colspan=\"2\">total</td>"), "{out}");
    assert!(
        out.contains("<th data-label=\"Ref\">All</th><td data-label=\"Amt\">9</td>"),
        "{out}"
    );
    assert!(out.ends_with("</table><td>"), "{out}");
    assert!(out.contains("<thead><tr><th>Ref</th>"), "{out}");
}
