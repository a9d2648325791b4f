//! Integration tests: the real server on port 0, a fresh SQLite data dir per
//! test, the real components, HTTP over loopback.

#[path = "../support/mod.rs"]
mod support;

mod adapters_admin;
mod address_space;
mod artefact;
mod auth;
mod backup;
mod books;
mod checkout;
mod cli;
mod code_map;
mod conflicts;
mod connections;
mod console;
mod crash;
mod create;
mod docs;
mod export;
mod fleet;
mod fleet_faults;
mod ingress;
mod isolation;
mod legacy;
mod lifecycle;
mod listing;
mod logs;
mod monitoring;
mod openapi;
mod platform;
mod predict;
mod process;
mod quickstart;
mod receiver;
mod routes;
mod sdk;
mod security;
mod tenancy;
mod traces;
mod webhooks;
