//! `multipart/form-data` (RFC 7578) as the console sends it: the upload
//! form's file, read as it arrives ([`crate::bulk_upload`]), handed to the
//! bulk component's CSV import as a multipart body of its own.

/// A multipart body of `fields` and one file: (Content-Type, body), written
/// by the API kit, as `bulk` reads it.
pub fn encode(fields: &[(&str, &str)], file: (&str, &str, &[u8])) -> (String, Vec<u8>) {
    let boundary = format!("mmc-console-{}", uuid::Uuid::new_v4().simple());
    mmc_api_kit::multipart::encode(fields, file, &boundary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn what_is_encoded_parses_back() {
        let csv = b"beneficiary_name,phone\r\nAwa,+229\r\n";
        let (ct, body) = encode(&[("name", "June")], ("file", "pay\"roll.csv", csv));
        let stream =
            futures::stream::once(async move { Ok::<_, std::io::Error>(bytes::Bytes::from(body)) });
        let mut form = multer::Multipart::new(stream, multer::parse_boundary(&ct).unwrap());
        let name = form.next_field().await.unwrap().unwrap();
        assert_eq!(name.name(), Some("name"));
        assert_eq!(name.text().await.unwrap(), "June");
        let file = form.next_field().await.unwrap().unwrap();
        assert_eq!(file.file_name(), Some("payroll.csv"));
        assert_eq!(&file.bytes().await.unwrap()[..], csv);
        assert!(form.next_field().await.unwrap().is_none());
    }
}
