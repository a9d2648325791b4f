//! Fixtures: what a test needs before the thing it tests, made in one call
//! and checked as it is made, so that the test says only what it tests.

use super::TestApp;

impl TestApp {
    /// A new merchant named `name`, with a key in each environment: its
    /// test key (see [`TestApp::merchant`] for its id and live key).
    pub fn test_key(&self, name: &str) -> String {
        self.merchant(name).1
    }
}
