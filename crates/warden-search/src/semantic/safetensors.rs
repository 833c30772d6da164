//! Just enough of the safetensors format to read one `F32` matrix: an 8-byte little-endian
//! header length, a JSON header naming each tensor's dtype, shape and byte range, then the
//! raw data. Every number read from the file is checked against the file's length before
//! it is used.

use serde_json::Value;

/// The largest header accepted, in bytes.
const HEADER_CAP: u64 = 16 * 1024 * 1024;

/// A 2-dimensional `F32` tensor, row-major.
#[derive(Debug)]
pub(crate) struct Matrix {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) data: Vec<f32>,
}

/// Reads the 2-dimensional tensor `name` from the safetensors bytes `file`. The error says
/// what is wrong.
pub(crate) fn read_matrix(file: &[u8], name: &str) -> Result<Matrix, String> {
    let (shape, data) = read_tensor(file, name)?;
    let [rows, cols] = shape[..] else {
        return Err(format!("tensor {name} is not 2-dimensional"));
    };
    Ok(Matrix { rows, cols, data })
}

/// Reads the `F32` tensor `name` (any shape) from the safetensors bytes `file`.
pub(crate) fn read_tensor(file: &[u8], name: &str) -> Result<(Vec<usize>, Vec<f32>), String> {
    let len_bytes: [u8; 8] = file
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or("shorter than a safetensors header")?;
    let header_len = u64::from_le_bytes(len_bytes);
    if header_len > HEADER_CAP || header_len + 8 > file.len() as u64 {
        return Err(format!("header length {header_len} does not fit the file"));
    }
    let header_end = 8 + header_len as usize;
    let header: Value = serde_json::from_slice(&file[8..header_end])
        .map_err(|e| format!("header is not JSON: {e}"))?;
    let entry = header
        .get(name)
        .ok_or_else(|| format!("no tensor named {name}"))?;
    if entry.get("dtype").and_then(Value::as_str) != Some("F32") {
        return Err(format!("tensor {name} is not F32"));
    }
    let shape: Vec<u64> = entry
        .get("shape")
        .and_then(Value::as_array)
        .map(|dims| dims.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    if shape.is_empty() || shape.len() > 4 {
        return Err(format!("tensor {name} has {} dimensions", shape.len()));
    }
    let offsets: Vec<u64> = entry
        .get("data_offsets")
        .and_then(Value::as_array)
        .map(|o| o.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    let [begin, end] = offsets[..] else {
        return Err(format!("tensor {name} has no data_offsets"));
    };
    let expected = shape
        .iter()
        .try_fold(4u64, |n, d| n.checked_mul(*d))
        .ok_or_else(|| format!("tensor {name} is too large"))?;
    let data_len = (file.len() - header_end) as u64;
    if begin > end || end > data_len || end - begin != expected {
        return Err(format!(
            "tensor {name}'s byte range does not match its shape"
        ));
    }
    let bytes = &file[header_end + begin as usize..header_end + end as usize];
    let data = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    Ok((shape.iter().map(|d| *d as usize).collect(), data))
}

/// Writes a safetensors file holding one `F32` matrix (the distilled table).
pub(crate) fn write_matrix(name: &str, rows: usize, cols: usize, data: &[f32]) -> Vec<u8> {
    write_tensors(&[(name, &[rows, cols], data)])
}

/// Writes a safetensors file holding `F32` tensors, each `(name, shape, data)`, in order
/// (tests build small models with it).
pub fn write_tensors(tensors: &[(&str, &[usize], &[f32])]) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let mut offset = 0usize;
    for (name, shape, data) in tensors {
        let end = offset + data.len() * 4;
        header.insert(
            (*name).to_owned(),
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [offset, end]}),
        );
        offset = end;
    }
    let header = Value::Object(header).to_string();
    let mut out = Vec::with_capacity(8 + header.len() + offset);
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for (_, _, data) in tensors {
        for x in *data {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let file = write_matrix("m", 2, 3, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let m = read_matrix(&file, "m").unwrap();
        assert_eq!((m.rows, m.cols), (2, 3));
        assert_eq!(m.data[5], 6.0);
        assert!(
            read_matrix(&file, "other")
                .unwrap_err()
                .contains("no tensor")
        );
        assert!(
            read_matrix(&file[..file.len() - 4], "m")
                .unwrap_err()
                .contains("byte range")
        );
        assert!(read_matrix(&file[..4], "m").is_err());
        let (shape, data) = read_tensor(&file, "m").unwrap();
        assert_eq!((shape, data.len()), (vec![2, 3], 6));
        let mut huge = file.clone();
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(
            read_matrix(&huge, "m")
                .unwrap_err()
                .contains("header length")
        );
    }
}
