//! Components in and out: a directory loaded at start, one component
//! prepared (compiled, cached, checked for its kind, described, smoke-tested)
//! before it is installed in place of the version it replaces.

use super::*;

impl Runtime {
    /// Loads every `*.wasm` of `dir` (name = file stem). Returns the names loaded.
    /// Loads every component of `source`; returns their names.
    pub fn load_from(
        self: &Arc<Self>,
        source: &mmc_bundle::ComponentsSource,
    ) -> Result<Vec<String>, LoadError> {
        match source {
            mmc_bundle::ComponentsSource::Dir(dir) => self.load_dir(dir),
            mmc_bundle::ComponentsSource::Builtin(bundle) => {
                let mut names = Vec::new();
                for c in &bundle.components {
                    let loaded = self.prepare(&c.name, &c.bytes)?;
                    self.install(loaded);
                    names.push(c.name.clone());
                }
                Ok(names)
            }
        }
    }

    pub fn load_dir(self: &Arc<Self>, dir: &Path) -> Result<Vec<String>, LoadError> {
        let entries = std::fs::read_dir(dir).map_err(|source| LoadError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
            .collect();
        paths.sort();
        let mut names = Vec::new();
        for path in paths {
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            let bytes = std::fs::read(&path).map_err(|source| LoadError::Read {
                path: path.clone(),
                source,
            })?;
            let loaded = self.prepare(&name, &bytes)?;
            self.install(loaded);
            names.push(name);
        }
        Ok(names)
    }

    /// Compiles (or fetches from the cache), links and, for adapters, asks
    /// for a description. Nothing is swapped in yet.
    pub fn prepare(self: &Arc<Self>, name: &str, bytes: &[u8]) -> Result<Loaded, LoadError> {
        let hash = hex::encode(Sha256::digest(bytes));
        let component = compile::compile_cached(&self.engine, &self.cache_dir, name, &hash, bytes)
            .map_err(|message| LoadError::Compile {
                name: name.into(),
                message,
            })?;
        let exports: Vec<String> = component
            .component_type()
            .exports(&self.engine)
            .map(|(n, _)| n.to_string())
            .collect();
        let has = |iface: &str| exports.iter().any(|e| e.starts_with(iface));
        let link = |e: wasmtime::Error| LoadError::Link {
            name: name.into(),
            message: wasm_error(e),
        };
        let (kind, pre) = if has("mmc:adapter/operator@") {
            let pre = self
                .adapter_linker
                .instantiate_pre(&component)
                .map_err(link)?;
            (
                Kind::Adapter,
                Pre::Adapter(AdapterPre::new(pre).map_err(link)?),
            )
        } else if has("mmc:api/handler@") && has("mmc:api/payments@") {
            let pre = self.api_linker.instantiate_pre(&component).map_err(link)?;
            (
                Kind::Collect,
                Pre::Collect(CollectPre::new(pre).map_err(link)?),
            )
        } else if has("mmc:api/handler@") && has("mmc:api/jobs@") {
            let pre = self.api_linker.instantiate_pre(&component).map_err(link)?;
            (
                Kind::Service,
                Pre::Service(ServicePre::new(pre).map_err(link)?),
            )
        } else if has("mmc:api/handler@") {
            let pre = self.api_linker.instantiate_pre(&component).map_err(link)?;
            (
                Kind::Surface,
                Pre::Surface(SurfacePre::new(pre).map_err(link)?),
            )
        } else {
            return Err(LoadError::UnknownWorld { name: name.into() });
        };
        let handler = exports
            .iter()
            .find(|e| e.starts_with("mmc:api/handler@"))
            .and_then(|iface| component.get_export_index(None, iface))
            .and_then(|iface| component.get_export_index(Some(&iface), "handle"));
        let books = match &pre {
            Pre::Adapter(p) => bindings::provider_books::GuestIndices::new(p.instance_pre()).ok(),
            _ => None,
        };
        let recheck = match &pre {
            Pre::Collect(p) => bindings::record_recheck::GuestIndices::new(p.instance_pre()).ok(),
            Pre::Service(p) => bindings::record_recheck::GuestIndices::new(p.instance_pre()).ok(),
            _ => None,
        };
        let mut loaded = Loaded {
            handler,
            books,
            recheck,
            name: name.to_string(),
            kind,
            hash,
            loaded_at_ms: self.services.clock.now_ms(),
            operators: Vec::new(),
            config: Arc::new(self.component_config.get(name).cloned().unwrap_or_default()),
            pre,
        };
        if kind != Kind::Adapter && loaded.warm_calls().is_some() {
            tracing::warn!(component = %name, "calls_per_instance applies to adapters only: every call of an API component has a fresh instance");
        }
        if kind == Kind::Adapter {
            let loaded_ref = &loaded;
            loaded.operators = self
                .invoke(loaded_ref, |store, pre| match pre {
                    Pre::Adapter(p) => p
                        .instantiate(&mut *store)?
                        .mmc_adapter_operator()
                        .call_describe(&mut *store),
                    _ => unreachable!("kind checked above"),
                })
                .map_err(|e| LoadError::Describe {
                    name: name.into(),
                    message: e.to_string(),
                })?;
        }
        Ok(loaded)
    }

    /// Asks every loaded adapter to describe itself again: an adapter may take
    /// its limits and availability from its provider (pawaPay's active
    /// configuration), so the catalogue follows them. A changed description
    /// replaces the installed version's (same code, same hash); a failed one
    /// keeps the last.
    pub fn refresh_descriptions(self: &Arc<Self>) {
        for loaded in self.list().into_iter().filter(|l| l.kind == Kind::Adapter) {
            let described = self.invoke(&loaded, |store, pre| match pre {
                Pre::Adapter(p) => p
                    .instantiate(&mut *store)?
                    .mmc_adapter_operator()
                    .call_describe(&mut *store),
                _ => unreachable!("adapters only"),
            });
            let Ok(operators) = described else { continue };
            if operators == loaded.operators {
                continue;
            }
            let mut components = self.components.write();
            // Unless a deploy or a rollback replaced it meanwhile.
            if components
                .get(&loaded.name)
                .is_some_and(|c| Arc::ptr_eq(c, &loaded))
            {
                tracing::info!(component = %loaded.name, "adapter description changed");
                components.insert(
                    loaded.name.clone(),
                    Arc::new(Loaded {
                        name: loaded.name.clone(),
                        kind: loaded.kind,
                        hash: loaded.hash.clone(),
                        loaded_at_ms: loaded.loaded_at_ms,
                        operators,
                        config: loaded.config.clone(),
                        pre: loaded.pre.clone(),
                        handler: loaded.handler,
                        books: loaded.books.clone(),
                        recheck: loaded.recheck.clone(),
                    }),
                );
            }
        }
    }

    /// Makes `loaded` the version that serves new calls. Calls in flight keep theirs.
    pub fn install(&self, loaded: Loaded) -> Option<Arc<Loaded>> {
        tracing::info!(component = %loaded.name, kind = ?loaded.kind, hash = %&loaded.hash[..12], "component loaded");
        self.components
            .write()
            .insert(loaded.name.clone(), Arc::new(loaded))
    }

    pub fn get(&self, name: &str) -> Option<Arc<Loaded>> {
        self.components.read().get(name).cloned()
    }

    pub fn list(&self) -> Vec<Arc<Loaded>> {
        let mut all: Vec<_> = self.components.read().values().cloned().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// Calls `parse-callback` on a prepared (not installed) adapter version.
    pub fn smoke_parse_callback(
        self: &Arc<Self>,
        loaded: &Loaded,
        probe: &bindings::adapter_types::Inbound,
    ) -> Result<
        Result<Vec<bindings::adapter_types::CallbackUpdate>, bindings::adapter_types::AdapterError>,
        CallError,
    > {
        self.invoke(loaded, |store, pre| match pre {
            Pre::Adapter(p) => p
                .instantiate(&mut *store)?
                .mmc_adapter_operator()
                .call_parse_callback(&mut *store, probe),
            _ => Err(wasmtime::format_err!("not an adapter")),
        })
    }
}
