pub mod kubernetes;
