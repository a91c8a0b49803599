//! pylog_native: Kafka record batch v2 → Arrow buffers, for the `pylog` Spark source.
//!
//! The sink's side is in `encode_py` (Arrow buffers → record batches; row → partition).
//!
//! `decode_batches(data, start, end, include_headers, verify_crc, max_batch_bytes, max_rows)` (data: any contiguous
//! byte buffer: bytes, or a memoryview of a received response, read in place) returns a dict of
//! Arrow buffers (as `Buffer` objects that expose the buffer protocol, so pyarrow wraps them without
//! a copy) plus row count, next offset and per-batch metadata. Every byte is untrusted: errors are
//! `DecodeError` with a message naming the batch's base offset and the byte position; no panic and
//! no allocation sized by an unchecked count. The GIL is released while decoding.

pub mod arrow_view;
pub mod columns;
pub mod compression;
pub mod decode;
pub mod encode;
pub mod error;
pub mod lz4_frame;
pub mod partition;
pub mod reader;
pub mod validate;

#[cfg(feature = "python")]
mod encode_py;

#[cfg(feature = "python")]
mod python {
    use std::os::raw::{c_int, c_void};

    use pyo3::buffer::PyBuffer;
    use pyo3::create_exception;
    use pyo3::exceptions::{PyBufferError, PyValueError};
    use pyo3::ffi;
    use pyo3::prelude::*;
    use pyo3::types::{PyDict, PyList, PyTuple};

    use crate::columns::{i32_bytes, i64_bytes, VarColumn};
    use crate::decode::{decode, Options};
    use crate::validate::{validate, Limits};

    create_exception!(pylog_native, DecodeError, PyValueError, "A record batch is corrupt; the message names where.");
    create_exception!(pylog_native, ValidationError, PyValueError,
                      "A produced record batch is rejected; `code` is the Kafka error code, the message names where.");

    /// An immutable byte buffer owned by Rust, exported through the buffer protocol (zero copy).
    #[pyclass(frozen, module = "pylog_native")]
    pub struct Buffer {
        data: Vec<u8>,
    }

    #[pymethods]
    impl Buffer {
        fn __len__(&self) -> usize {
            self.data.len()
        }

        unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
            if view.is_null() {
                return Err(PyBufferError::new_err("no view"));
            }
            if (flags & ffi::PyBUF_WRITABLE) == ffi::PyBUF_WRITABLE {
                return Err(PyBufferError::new_err("Buffer is read-only"));
            }
            let data = &slf.get().data;
            let rc = ffi::PyBuffer_FillInfo(view, slf.as_ptr(), data.as_ptr() as *mut c_void,
                                            data.len() as ffi::Py_ssize_t, 1, flags);
            if rc != 0 {
                return Err(PyErr::fetch(slf.py()));
            }
            Ok(())
        }

        unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}
    }

    pub(crate) fn buf(py: Python<'_>, data: Vec<u8>) -> PyResult<Py<Buffer>> {
        Py::new(py, Buffer { data })
    }

    fn var_column<'py>(py: Python<'py>, d: &Bound<'py, PyDict>, name: &str, c: VarColumn) -> PyResult<()> {
        d.set_item(format!("{name}_validity"), if c.validity.nulls > 0 { Some(buf(py, c.validity.bits)?) } else { None })?;
        d.set_item(format!("{name}_nulls"), c.validity.nulls)?;
        d.set_item(format!("{name}_offsets"), buf(py, i32_bytes(&c.offsets))?)?;
        d.set_item(format!("{name}_data"), buf(py, c.data)?)?;
        Ok(())
    }

    #[pyfunction]
    #[pyo3(signature = (data, start, end, include_headers=false, verify_crc=true, max_batch_bytes=256 * 1024 * 1024,
                        max_rows=usize::MAX))]
    fn decode_batches<'py>(py: Python<'py>, data: PyBuffer<u8>, start: i64, end: i64, include_headers: bool,
                           verify_crc: bool, max_batch_bytes: usize, max_rows: usize) -> PyResult<Bound<'py, PyDict>> {
        if !data.is_c_contiguous() {
            return Err(PyBufferError::new_err("decode_batches needs a contiguous buffer"));
        }
        // SAFETY: the buffer is contiguous, `data` keeps the exporter alive and its view locked until it
        // is dropped at the end of this function, and the decoder only reads.
        let bytes: &[u8] = unsafe { std::slice::from_raw_parts(data.buf_ptr() as *const u8, data.len_bytes()) };
        let opts = Options { start, end, include_headers, verify_crc, max_batch_bytes, max_rows };
        let decoded = py.detach(|| decode(bytes, &opts)).map_err(|e| {
            // the Python error carries where the corrupt batch starts, so the good batches before it can be kept
            let err = DecodeError::new_err(e.to_string());
            let value = err.value(py);
            let _ = value.setattr("batch_start", e.batch_start);
            let _ = value.setattr("base_offset", e.base_offset);
            err
        })?;
        let d = PyDict::new(py);
        d.set_item("rows", decoded.rows())?;
        d.set_item("next_offset", decoded.next_offset)?;
        d.set_item("consumed", decoded.consumed)?;
        let batches = PyList::empty(py);
        for b in &decoded.batches {
            batches.append(PyTuple::new(py, [b.base_offset.into_pyobject(py)?.into_any(),
                                             b.last_offset.into_pyobject(py)?.into_any(),
                                             b.producer_id.into_pyobject(py)?.into_any(),
                                             pyo3::types::PyBool::new(py, b.transactional).to_owned().into_any(),
                                             pyo3::types::PyBool::new(py, b.control).to_owned().into_any()])?)?;
        }
        d.set_item("batches", batches)?;
        d.set_item("offset", buf(py, i64_bytes(&decoded.offsets))?)?;
        d.set_item("timestamp_us", buf(py, i64_bytes(&decoded.timestamps_us))?)?;
        d.set_item("timestamp_type", buf(py, i32_bytes(&decoded.timestamp_types))?)?;
        var_column(py, &d, "key", decoded.keys)?;
        var_column(py, &d, "value", decoded.values)?;
        if let Some(h) = decoded.headers {
            d.set_item("headers_offsets", buf(py, i32_bytes(&h.list_offsets))?)?;
            var_column(py, &d, "header_key", h.keys)?;
            var_column(py, &d, "header_value", h.values)?;
        }
        Ok(d)
    }

    /// Validate one partition's produce data as Kafka's LogValidator does (see `validate.rs`).
    /// Returns (max timestamp per batch, [(record index, error code, message)]); raises
    /// ValidationError (with `code`, `batch_start`, `base_offset`) when the request must be rejected.
    #[pyfunction]
    #[pyo3(signature = (data, compacted, create_time, max_uncompressed_bytes, min_timestamp=i64::MIN,
                        max_timestamp=i64::MAX))]
    fn validate_batches<'py>(py: Python<'py>, data: PyBuffer<u8>, compacted: bool, create_time: bool,
                             max_uncompressed_bytes: usize, min_timestamp: i64, max_timestamp: i64)
                             -> PyResult<(Vec<i64>, Vec<(u32, i16, String)>)> {
        if !data.is_c_contiguous() {
            return Err(PyBufferError::new_err("validate_batches needs a contiguous buffer"));
        }
        // SAFETY: as in decode_batches: contiguous, kept alive and locked by `data`, only read.
        let bytes: &[u8] = unsafe { std::slice::from_raw_parts(data.buf_ptr() as *const u8, data.len_bytes()) };
        let limits = Limits { compacted, create_time, max_uncompressed_bytes, min_timestamp, max_timestamp };
        let v = py.detach(|| validate(bytes, &limits)).map_err(|r| {
            let err = ValidationError::new_err(r.error.to_string());
            let value = err.value(py);
            let _ = value.setattr("code", r.code);
            let _ = value.setattr("batch_start", r.error.batch_start);
            let _ = value.setattr("base_offset", r.error.base_offset);
            err
        })?;
        Ok((v.max_timestamps, v.record_errors.into_iter().map(|e| (e.index, e.code, e.message)).collect()))
    }

    #[pymodule]
    fn pylog_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add_function(wrap_pyfunction!(decode_batches, m)?)?;
        m.add_function(wrap_pyfunction!(validate_batches, m)?)?;
        m.add("ValidationError", m.py().get_type::<ValidationError>())?;
        m.add_class::<Buffer>()?;
        m.add("DecodeError", m.py().get_type::<DecodeError>())?;
        crate::encode_py::register(m)?;
        Ok(())
    }
}
