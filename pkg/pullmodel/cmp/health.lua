-- Argo CD health of an OCM ManifestWork, from what OCM's work agent reports for the work's
-- current generation. Argo CD runs health checks without Lua's string library: only the base
-- and table libraries are used here.
--
-- Degraded: a manifest could not be applied (Applied=False, with the agent's message), the
--   work reports Degraded=True, or a workload failed: its readiness rule says Ready=False and
--   Progressing=False (a Deployment past its progress deadline, a failed Job), or the rule
--   could not be evaluated.
-- Progressing: the agent has not applied the current generation yet, an object does not exist
--   yet (Available not True), or a workload is not ready yet: its readiness is not reported
--   for this generation, or Ready=False with Progressing=True. A Deployment whose pods crash
--   stays Progressing until its progress deadline passes, as Argo CD reads a Deployment.
-- Healthy: everything applied and available, and every workload with a readiness rule Ready.
--
-- A workload has a readiness rule when spec.manifestConfigs gives its resource a condition
-- rule for Ready (the CMP adds one for Deployments, StatefulSets, DaemonSets and Jobs).
-- Other manifests count once applied and available.
local hs = {status = "Progressing", message = "Waiting for OCM's work agent on the cluster"}
if obj.status == nil then
  return hs
end
local generation = obj.metadata.generation

local function current(conditions)
  local out = {}
  if conditions ~= nil then
    for _, c in ipairs(conditions) do
      if c.observedGeneration == nil or generation == nil or c.observedGeneration == generation then
        out[c.type] = c
      end
    end
  end
  return out
end

local function text(s)
  if s == nil then
    return ""
  end
  return s
end

local function name(meta)
  if meta == nil then
    return "a manifest"
  end
  local n = text(meta.name)
  if meta.namespace ~= nil and meta.namespace ~= "" then
    n = meta.namespace .. "/" .. n
  end
  return text(meta.kind) .. " " .. n
end

local function matches(pattern, value)
  return pattern == "*" or text(pattern) == text(value)
end

-- Whether spec.manifestConfigs has a Ready rule for this manifest.
local function hasReadinessRule(meta)
  if meta == nil or obj.spec == nil or obj.spec.manifestConfigs == nil then
    return false
  end
  for _, config in ipairs(obj.spec.manifestConfigs) do
    local id = config.resourceIdentifier
    if id ~= nil and config.conditionRules ~= nil and matches(id.group, meta.group) and
        text(id.resource) == text(meta.resource) and matches(id.name, meta.name) and
        matches(id.namespace, meta.namespace) then
      for _, rule in ipairs(config.conditionRules) do
        if rule.condition == "Ready" then
          return true
        end
      end
    end
  end
  return false
end

local work = current(obj.status.conditions)
local manifests = {}
if obj.status.resourceStatus ~= nil and obj.status.resourceStatus.manifests ~= nil then
  manifests = obj.status.resourceStatus.manifests
end

if work.Applied ~= nil and work.Applied.status == "False" then
  hs.status = "Degraded"
  hs.message = work.Applied.message
  for _, m in ipairs(manifests) do
    local c = current(m.conditions)
    if c.Applied ~= nil and c.Applied.status == "False" then
      hs.message = name(m.resourceMeta) .. ": " .. text(c.Applied.message)
      break
    end
  end
  return hs
end
if work.Degraded ~= nil and work.Degraded.status == "True" then
  hs.status = "Degraded"
  hs.message = work.Degraded.message
  return hs
end
if work.Applied == nil then
  return hs
end

-- The workloads' readiness, as the work agent evaluated their rules for this generation.
local workloads, ready = 0, 0
local failed, waiting
for _, m in ipairs(manifests) do
  if hasReadinessRule(m.resourceMeta) then
    workloads = workloads + 1
    local c = current(m.conditions)
    local r, p = c.Ready, c.Progressing
    if r == nil then
      waiting = waiting or (name(m.resourceMeta) .. ": waiting for the work agent to report its readiness")
    elseif r.reason ~= "ConditionRuleEvaluated" then
      failed = failed or (name(m.resourceMeta) .. ": its readiness could not be evaluated: " .. text(r.message))
    elseif r.status == "True" then
      ready = ready + 1
    elseif p ~= nil and p.reason == "ConditionRuleEvaluated" and p.status == "False" then
      failed = failed or (name(m.resourceMeta) .. ": " .. text(r.message))
    else
      waiting = waiting or (name(m.resourceMeta) .. ": " .. text(r.message))
    end
  end
end

if failed ~= nil then
  hs.status = "Degraded"
  hs.message = failed
  return hs
end
if work.Available == nil or work.Available.status ~= "True" then
  if work.Available ~= nil then
    hs.message = work.Available.message
  end
  return hs
end
if waiting ~= nil then
  hs.message = ready .. " of " .. workloads .. " workloads ready; " .. waiting
  return hs
end
hs.status = "Healthy"
if workloads > 0 then
  hs.message = "All " .. workloads .. " workloads ready"
else
  hs.message = work.Available.message
end
return hs
